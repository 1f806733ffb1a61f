"""trainer.precision=auto: bf16 where this machine trains the model faster in it, measured at start-up.

On a GPU, auto is bf16 autocast. On a CPU with bf16 matrix instructions (avx512_bf16, AMX) bf16
pays at large matmuls, such as the output projection (batch tokens × hidden × vocab), while the
recurrent step's small matmuls gain little and full autocast adds a cast to each of its many
small ops. So auto times a few forward and backward passes of the model itself on a batch of the
configured size in ``fp32``, ``bf16_output`` (W_s and the loss in bf16, the rest fp32) and full
``bf16``, and keeps the fastest if it beats fp32 by 25 %.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from nmt.device import autocast, cpu_info
from nmt.model import Seq2Seq

log = logging.getLogger("nmt.precision")

CANDIDATES = ("fp32", "bf16_output", "bf16")
# a bf16 choice must time this much faster than fp32: on a 2-core AMX CPU a pass timed 1.13x faster
# in bf16, yet 15 minutes of bench-small trained at the same 3,600 tok/s, 1.5 test BLEU lower
GAIN = 1.25
MIN_GFLOP = 0.05  # an output projection below this is too small for bf16 to pay: fp32 without timing
SENTENCE = 10  # pieces per sentence of the timing batch (Tatoeba: about 8)


def choose(tr: DictConfig, model: Seq2Seq, device: torch.device) -> str:
    """The precision this run trains in: ``tr.precision`` itself unless it is auto."""
    if tr.precision != "auto":
        return tr.precision
    if device.type != "cpu":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return _chose("bf16" if bf16 else "fp32", f"on a {device.type} device")
    if not cpu_info()["native_bf16"]:
        return _chose("fp32", "this CPU has neither avx512_bf16 nor AMX")
    hidden, vocab = model.decoder.hidden, model.decoder.out.out_features
    if 2 * tr.batch_tokens * hidden * vocab / 1e9 < MIN_GFLOP:
        return _chose("fp32", f"the output projection ({tr.batch_tokens}×{hidden}×{vocab}) is too small for bf16")
    ms = step_ms(model, tr.batch_tokens, device)
    best = min(ms, key=ms.get)
    times = ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items())
    return _chose(best if ms["fp32"] / ms[best] >= GAIN else "fp32", f"a training pass takes {times}")


def step_ms(model: Seq2Seq, tokens: int, device: torch.device, repeats: int = 3) -> dict[str, float]:
    """Best-of-``repeats`` milliseconds of one forward and backward pass on a random batch of
    ``tokens`` pieces a side, per candidate precision (interleaved: the machine's speed drifts).
    The random-number state and the gradients are as they were before."""
    rows, rng = max(tokens // SENTENCE, 1), torch.get_rng_state()
    src = torch.randint(4, model.encoder.embed.num_embeddings, (rows, SENTENCE), device=device)
    tgt = torch.randint(4, model.decoder.out.out_features, (rows, SENTENCE + 1), device=device)
    lens = torch.full((rows,), SENTENCE, device=device)
    best = dict.fromkeys(CANDIDATES, float("inf"))
    for r in range(repeats + 1):
        for precision in CANDIDATES:
            model.bf16_output = precision == "bf16_output"
            t = time.perf_counter()
            with autocast(device, precision):
                logits, _ = model(src, lens, (SENTENCE,) * rows, tgt[:, :-1])
            F.cross_entropy(logits.flatten(0, 1).float(), tgt[:, 1:].flatten()).backward()
            if r:  # round 0 warms up
                best[precision] = min(best[precision], (time.perf_counter() - t) * 1e3)
    model.bf16_output = False
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(rng)
    return best


def _chose(precision: str, why: str) -> str:
    log.info("precision auto -> %s: %s", precision, why)
    return precision
