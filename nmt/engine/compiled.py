"""The fast engine's decoder step through ``torch.compile``, with an eager fallback (``trainer.compile=true``).

Plugged in at construction: ``build_model(..., compile_step=True)`` (nmt/build.py; nmt/engine/decoder.py).

The step (about ten small kernels per layer) is launch-bound on a GPU, and Inductor fuses its pointwise
work; yet on an H100 (record gpu_check_h100_compiled.json) the compiled step trained bench-small at 0.64x
eager's tokens/s and decoded greedy at 0.03x: the deferred gradients' weights and the grad mode are guards
that recompile it until torch.compile's recompile limit. On a 2-core EPYC it trained bench-small at 1.09x over 120
steps and 0.89x over 300 (records ab_train_compile_cpu*.json). So it is off unless asked for (null is off).
Not CUDA graphs: shapes change with every batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Optional

import torch

log = logging.getLogger(__name__)


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

