"""Deferred gradients: tensors used at every decoder step (the batch's keys and memory, the step's weight matrices)
get their gradient summed once per batch, not once per step. ``bmm`` and ``addmm`` on a ``tap``-ped tensor leave
their gradient to the tap, which adds every step's share in one matmul; otherwise they are ``torch.bmm`` and
``torch.addmm``. ``tests/test_engine.py`` checks the gradients equal autograd's.
"""

from __future__ import annotations

import weakref
from typing import Optional

import torch


class _SourceGrad:
    """The gradient of one tapped tensor, gathered from every step's backward for ``_Tap`` to hand on."""

    def __init__(self) -> None:
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # (L, R): the gradient is Σ Lᵀ R


class _Tap(torch.autograd.Function):
    """Identity whose backward, run after every step's (they all consume its output), adds their shares."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, acc: _SourceGrad) -> torch.Tensor:
        ctx.acc = acc
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        acc = ctx.acc
        if acc.pairs:  # one (B, S, T) × (B, T, H) matmul for all T steps' outer products (a weight: (O, T·B) × (T·B, I))
            L, R = (torch.cat(side, -2).to(grad.dtype) for side in zip(*acc.pairs))  # (B, T, S), (B, T, H) or (T·B, ·)
            grad = (torch.addmm if grad.dim() == 2 else torch.baddbmm)(grad, L.mT, R)
        acc.pairs = []
        return grad, None


class _DeferredBmm(torch.autograd.Function):
    """``a @ xᵀ`` (scores) or ``a @ x`` (context) for one step. Its backward leaves x's gradient, an outer
    product per step that autograd would add into a full (B, S, H) tensor every step, to ``_Tap``."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, x: torch.Tensor, acc: _SourceGrad, transpose: bool) -> torch.Tensor:
        ctx.save_for_backward(a, x)
        ctx.acc, ctx.transpose = acc, transpose
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        a, x = ctx.saved_tensors
        xg = x.to(g.dtype)  # out = a xᵀ: da = g x, dx = gᵀ a; out = a x: da = g xᵀ, dx = aᵀ g
        grad_a = torch.bmm(g, xg if ctx.transpose else xg.transpose(1, 2))
        ctx.acc.pairs.append((g, a) if ctx.transpose else (a, g))
        return grad_a.to(a.dtype), None, None, None


class _DeferredAddmm(torch.autograd.Function):
    """``bias + x wᵀ`` for one step and a tapped weight ``w`` (out, in): its gradient, an outer product per
    step that autograd would add into the full matrix every step, is left to ``_Tap``."""

    @staticmethod
    def forward(ctx, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor, acc: _SourceGrad) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.acc, ctx.rows = acc, bias.dim() == 2  # bias (batch, out) or (out,)
        return torch.addmm(bias, x, w.t())

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, w = ctx.saved_tensors
        ctx.acc.pairs.append((g, x))  # dw = Σ_steps gᵀ x
        grad_x = g @ w if ctx.needs_input_grad[1] else None
        return g if ctx.rows else g.sum(0), grad_x, None, None


def tap(x: torch.Tensor) -> torch.Tensor:
    """``x`` (keys or memory of a batch, a step's weight), its gradients from ``bmm`` and ``addmm`` summed once per
    batch (other uses of ``x``, such as a gathered window, keep autograd's)."""
    out = _Tap.apply(x, acc := _SourceGrad())
    _TAPPED[id(out)] = acc  # read by gather, bmm and addmm
    weakref.finalize(out, _TAPPED.pop, id(out), None)
    return out


# id(tapped tensor) -> its accumulator; an entry leaves when its tensor is freed (before the id can be reused)
_TAPPED: dict[int, _SourceGrad] = {}


def _accumulator(x: torch.Tensor) -> Optional[_SourceGrad]:
    """The accumulator of a tensor ``tap`` returned (None for any other tensor, e.g. a selection of one)."""
    return _TAPPED.get(id(x))


def bmm(a: torch.Tensor, x: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """``a @ xᵀ`` or ``a @ x`` for (batch, T, ·) ``a`` and a source-side (batch, src_len, hidden) ``x``."""
    acc = _accumulator(x)
    if acc is None or not torch.is_grad_enabled():
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)
    if torch.is_autocast_enabled(a.device.type):  # bmm runs in the autocast dtype, as torch.bmm would
        dtype = torch.get_autocast_dtype(a.device.type)
        a, x = a.to(dtype), x.to(dtype)
    return _DeferredBmm.apply(a, x, acc, transpose)


def addmm(bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``bias + x @ wᵀ`` for a step's (batch, in) ``x`` and (out, in) weight ``w``, its gradient for a tapped
    ``w`` left to the tap."""
    acc = _accumulator(w)
    if acc is None or not torch.is_grad_enabled():
        return torch.addmm(bias, x, w.t())
    if torch.is_autocast_enabled(x.device.type):  # addmm runs in the autocast dtype, as torch.addmm would
        dtype = torch.get_autocast_dtype(x.device.type)
        bias, x, w = bias.to(dtype), x.to(dtype), w.to(dtype)
    return _DeferredAddmm.apply(bias, x, w, acc)
