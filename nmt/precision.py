"""trainer.precision=auto: bf16 where this machine trains the model faster in it, measured at start-up.

On a CPU with bf16 matrix instructions (avx512_bf16, AMX) bf16 pays at large matmuls, such as the
output projection (batch tokens × hidden × vocab), while the recurrent step's small matmuls gain
little and full autocast adds a cast to each small op. So auto times forward and backward passes of
the model itself over a few of the run's own batches in ``fp32``, ``bf16_output`` (W_s and the loss
in bf16, the rest fp32) and full ``bf16``, and keeps the fastest if it beats fp32 by 50 % (a smaller
gain is within the timing's noise). On a GPU it times the same passes (synced) and keeps a bf16
candidate that is no slower than fp32.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from omegaconf import DictConfig

from nmt.batching import Batch
from nmt.device import autocast, cpu_info
from nmt.model import Seq2Seq
from nmt.update import batch_loss

log = logging.getLogger(__name__)

CANDIDATES = ("fp32", "bf16_output", "bf16")
# a bf16 choice must time this much faster than fp32. On a 2-core AMX CPU (2026-12-01) passes over
# 8 real batches timed bf16 at 0.96-1.29x of fp32 from one start to the next, one batch timed over
# and over at 1.4-1.6x, and 7 and 15 minutes of training ran no faster in bf16 than in fp32
GAIN = 1.5
# on a GPU, timed after a sync, bf16 needs only to be no slower (it also halves the activations' memory): on an
# H100 (gpu_check_h100_eager.json) bench-small trained at 11,534 target tok/s in bf16 against 20,135 in fp32
GPU_GAIN = 1.0
MIN_GFLOP = 0.05  # an output projection below this is too small for bf16 to pay: fp32 without timing


def choose(tr: DictConfig, model: Seq2Seq, device: torch.device, batches: Sequence[Batch]) -> str:
    """The precision this run trains in: ``tr.precision`` itself unless it is auto (then timed on ``batches``)."""
    if tr.precision != "auto":
        return tr.precision
    if device.type == "cuda":
        if not torch.cuda.is_bf16_supported():
            return _chose("fp32", "this GPU has no bf16")
        return _timed(model, batches, device, GPU_GAIN)
    if device.type != "cpu":
        return _chose("fp32", f"on a {device.type} device")
    if not cpu_info()["native_bf16"]:
        return _chose("fp32", "this CPU has neither avx512_bf16 nor AMX")
    hidden, vocab = model.decoder.hidden, model.decoder.out.out_features
    if 2 * tr.batch_tokens * hidden * vocab / 1e9 < MIN_GFLOP:
        return _chose("fp32", f"the output projection ({tr.batch_tokens}×{hidden}×{vocab}) is too small for bf16")
    return _timed(model, batches, device, GAIN)


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
