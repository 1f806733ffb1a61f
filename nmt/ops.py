"""The seam between the paper's equations and the speed machinery behind them.

``attention.py``, ``decoder.py`` and ``model.py`` compute the few operations of the decoder's loop that
touch the whole source or a step's weights through an ``Ops``:

    tap(x)               mark a tensor used at every step (the batch's keys and memory, a step's weights)
    bmm(a, x, transpose) a @ xᵀ (scores) or a @ x (context) against the source
    gather(x, index)     the 2D + 1 window of a long source (local modes)
    addmm(bias, x, w)    bias + x wᵀ, one LSTM step

``Ops`` is plain torch. ``nmt.source_grad.DeferredOps`` computes the same values, but sums the gradients
that a tapped tensor gets from every step in one matmul per batch, not one outer product per step.
``build_model`` plugs in ``fast_ops()``. ``tests/test_attention.py`` checks that both give the same loss
and the same gradients for every score and mode.
"""

from __future__ import annotations

import torch


class Ops:
    """Plain torch: what the equations say, and autograd's gradients."""

    defers = False  # True: the tap sums the steps' gradients (so a weight cast once per batch sums them in fp32)

    def tap(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def bmm(self, a: torch.Tensor, x: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)

    def gather(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.gather(1, index)

    def addmm(self, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias, x, w.t())


PLAIN = Ops()


def fast_ops() -> Ops:
    """The training path's ops: deferred per-step gradients (nmt/source_grad.py)."""
    from nmt.source_grad import DeferredOps  # source_grad subclasses Ops: imported here, not at the top

    return DeferredOps()
