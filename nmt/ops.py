"""The seam between the paper's equations and the speed machinery behind them.

``attention.py``, ``decoder.py`` and ``model.py`` compute the few operations of the decoder's loop that
touch the whole source or a step's weights through an ``Ops``:

    tap(x)               mark a tensor used at every step (the batch's keys and memory, a step's weights)
    bmm(a, x, transpose) a @ xᵀ (scores) or a @ x (context) against the source
    gather(x, index)     the 2D + 1 window of a long source (local modes)
    addmm(bias, x, w)    bias + x wᵀ, one LSTM step
    loop(step)           the decoder's loop step as it runs: itself, or compiled (``Ops(compile_step=True)``)

``Ops`` is plain torch; with ``compile_step`` its loop step goes through ``torch.compile`` (nmt/compiled_step.py).
``nmt.source_grad.DeferredOps`` computes the same values, but sums the gradients
that a tapped tensor gets from every step in one matmul per batch, not one outer product per step.
``build_model`` plugs in ``fast_ops()``. ``tests/test_attention.py`` checks that both give the same loss
and the same gradients for every score and mode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class Ops:
    """Plain torch: what the equations say, and autograd's gradients."""

    defers = False  # True: the tap sums the steps' gradients (so a weight cast once per batch sums them in fp32)

    def __init__(self, compile_step: bool = False):
        self.compile_step = compile_step

    def loop(self, step: Callable) -> Callable:
        """``step`` (the decoder's ``_step``) as the loop calls it: itself, or compiled with an eager fallback."""
        if not self.compile_step:
            return step
        from nmt.compiled_step import CompiledStep  # imports torch.compile's machinery only when asked for

        return CompiledStep(step)

    def tap(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def bmm(self, a: torch.Tensor, x: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)

    def gather(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.gather(1, index)

    def addmm(self, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias, x, w.t())


PLAIN = Ops()


def fast_ops(compile_step: bool = False) -> Ops:
    """The training path's ops: deferred per-step gradients (nmt/source_grad.py), the loop step compiled if asked."""
    from nmt.source_grad import DeferredOps  # source_grad subclasses Ops: imported here, not at the top

    return DeferredOps(compile_step)
