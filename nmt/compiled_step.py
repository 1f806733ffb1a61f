"""The input-feeding decoder step through ``torch.compile``, where it pays, with an eager fallback.

Plugged in at construction: ``build_model(..., ops=fast_ops(compile_step=True))`` (nmt/ops.py: ``Ops.loop``).

The step (about ten small kernels per layer) is launch-bound on a GPU; Inductor fuses its pointwise
work. Not CUDA graphs: shapes change with every batch, and training would need a graph per step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Optional

import torch

log = logging.getLogger(__name__)


def wanted(setting: Optional[bool], device: torch.device, input_feeding: bool) -> bool:
    """trainer.compile as given; null (auto): on CUDA, for an input-feeding decoder."""
    return device.type == "cuda" and input_feeding if setting is None else setting


class CompiledStep:
    """``step`` compiled (dynamic shapes); a compile failure warns once and runs eager from then on."""

    def __init__(self, step: Callable):
        self.eager = step
        self.compiled: Optional[Callable] = torch.compile(step, dynamic=True)

    def __call__(self, *args):
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as e:  # no triton, no C++ compiler, ...: torch documents no public base class of these
                out = self.eager(*args)  # a fault of the step itself raises here, not as a compile failure
                why = " ".join(str(e).split())[:300] or type(e).__name__
                log.warning("torch.compile of the decoder step failed, running it eagerly: %s", why)
                self.compiled = None
                return out
        return self.eager(*args)

