"""The input-feeding decoder step through ``torch.compile``, where it pays, with an eager fallback.

The step (about ten small kernels per layer) is launch-bound on a GPU; Inductor fuses its pointwise
work. Not CUDA graphs: shapes change with every batch, and training would need a graph per step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Optional

import torch

from nmt.decoder import Decoder

log = logging.getLogger(__name__)


def wanted(setting: Optional[bool], device: torch.device, decoder: Decoder) -> bool:
    """trainer.compile as given; null (auto): on CUDA, for an input-feeding decoder."""
    return device.type == "cuda" and decoder.input_feeding if setting is None else setting


class CompiledStep:
    """``step`` compiled (dynamic shapes); a compile failure warns once and runs eager from then on."""

    def __init__(self, step: Callable):
        self.eager = step
        self.compiled: Optional[Callable] = torch.compile(step, dynamic=True)

    def __call__(self, *args):
        if self.compiled is not None:
            import torch._dynamo  # private module, but torch documents no public base class of compile errors

            try:
                return self.compiled(*args)
            except torch._dynamo.exc.TorchDynamoException as e:  # no triton, no C++ compiler, ...
                why = " ".join(str(e).split())[:300] or type(e).__name__
                log.warning("torch.compile of the decoder step failed, running it eagerly: %s", why)
                self.compiled = None
        return self.eager(*args)


def compile_step(decoder: Decoder) -> None:
    """Route ``decoder``'s step (training and search alike) through ``CompiledStep``."""
    decoder._step = CompiledStep(decoder._step)
