"""trainer.precision=auto: fp32 on a CPU, a bf16 candidate on a GPU only where a synced timing says it clearly pays.

On a CPU no start-up probe chose well. A three-second timing of fp32, ``bf16_output`` and ``bf16`` passes flipped
from one fresh start to the next on one AMX machine (bf16 timed at 1.33× and 1.63× of fp32 an hour apart), and the
run it chose once trained at 0.63× the other's speed at 2.2× its memory (issue 57: `make demo` 3,683 updates and
test BLEU 30.96 against 5,819 and 33.25). Sustained A/B runs put bf16 at 1.02–1.09× of fp32 at 1.8× the peak
memory (docs/training.md, "Precision"). So auto is fp32 on every CPU, every time, and bf16 is an explicit choice
(``trainer.precision=bf16``). On a GPU the passes are timed after a sync, with little noise, and a bf16 candidate
must beat fp32 by ``GPU_GAIN``; on an H100 bench-small trained at 11,534 target tok/s in bf16 against 20,135 in
fp32 (record gpu_check_h100_eager.json), so small models stay fp32.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from omegaconf import DictConfig

from nmt.batching import Batch
from nmt.device import autocast
from nmt.model import Seq2Seq
from nmt.update import batch_loss

log = logging.getLogger(__name__)

CANDIDATES = ("fp32", "bf16_output", "bf16")
# on a GPU a bf16 candidate must time this much faster than fp32: never a precision change for a gain within the
# timing's noise (nor one that could cost more memory for less than this speed)
GPU_GAIN = 1.3


def choose(tr: DictConfig, model: Seq2Seq, device: torch.device, batches: Sequence[Batch]) -> str:
    """The precision this run trains in: ``tr.precision`` itself unless it is auto (then fp32 on a CPU, and on a GPU
    timed on ``batches``)."""
    if tr.precision != "auto":
        return tr.precision
    if device.type == "cuda":
        if not torch.cuda.is_bf16_supported():
            return _chose("fp32", "this GPU has no bf16")
        return _timed(model, batches, device, GPU_GAIN)
    if device.type != "cpu":
        return _chose("fp32", f"on a {device.type} device")
    return _chose("fp32", "auto is fp32 on a CPU, where no start-up timing chose bf16 reliably; bf16 is "
                          "trainer.precision=bf16 (docs/training.md#precision)")


def _timed(model: Seq2Seq, batches: Sequence[Batch], device: torch.device, gain: float) -> str:
    """The fastest candidate on ``batches`` if it times ``gain`` × faster than fp32, else fp32."""
    ms = step_ms(model, batches, device)
    best = min(ms, key=ms.get)
    times = ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items())
    return _chose(best if ms["fp32"] / ms[best] >= gain else "fp32", f"a training pass takes {times}")


def step_ms(model: Seq2Seq, batches: Sequence[Batch], device: torch.device) -> dict[str, float]:
    """Mean milliseconds of a forward and backward pass over ``batches``, per candidate precision,
    interleaved batch by batch (the machine's speed drifts) after a warm-up pass each. The
    random-number state and the gradients are as they were before."""
    cuda = device.type == "cuda"
    rng, total = torch.get_rng_state(), dict.fromkeys(CANDIDATES, 0.0)
    cuda_rng = torch.cuda.get_rng_state(device) if cuda else None
    for i, b in enumerate([batches[0], *batches]):  # the first pass warms up
        b = b.to(device)
        for precision in CANDIDATES:
            if cuda:
                torch.cuda.synchronize(device)
            t = time.perf_counter()
            with autocast(device, precision):
                loss = batch_loss(model, b, precision=precision)
            loss.backward()
            if cuda:
                torch.cuda.synchronize(device)
            total[precision] += time.perf_counter() - t if i else 0.0
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(rng)
    if cuda:
        torch.cuda.set_rng_state(cuda_rng, device)
    return {p: t * 1000 / len(batches) for p, t in total.items()}


def _chose(precision: str, why: str) -> str:
    log.info("precision auto -> %s: %s", precision, why)
    return precision
