"""Luong attention (Luong, Pham & Manning 2015, https://aclanthology.org/D15-1166).

Scores between the decoder state h_t and each source state h̄_s:

    dot         h_tᵀ h̄_s
    general     h_tᵀ W_a h̄_s
    concat      v_aᵀ tanh(W_a [h_t; h̄_s])  with a full W_a (the paper's weak concat figures came
                                           from a variant with part of W_a fixed to the identity)
    location    a_t = softmax(W_a h_t) over a fixed maximum source length (the paper's baseline)
    scaled_dot  h_tᵀ h̄_s / √d  (Vaswani et al. 2017)
    heads = N   multi-head: h_t, h̄_s projected per head, scaled dot per head, heads concatenated
                and projected back (as torch.nn.MultiheadAttention without biases)

Modes (for multi-head, the window and the Gaussian apply to every head):

    global   a_t = softmax over every real source position (padding masked to -inf)
    local_m  p_t = t; softmax within [p_t - D, p_t + D] ∩ [0, S_i - 1]; p_t is clamped to the
             last source position so that a long output still has a window to attend to
    local_p  p_t = S_i · sigmoid(v_pᵀ tanh(W_p h_t)) with S_i the sentence's own length;
             a_t(s) = softmax-within-window(score)(s) · exp(-(s - p_t)² / (2σ²)), σ = D / 2

The source-side half of every score (W_a h̄_s for general, the h̄_s half of concat, the
per-head keys and values) is computed once per batch by ``keys`` and passed to every step.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

SCORES = ("dot", "general", "concat", "location", "scaled_dot")


class _SourceGrad:
    """Gradient for one source-side tensor of a batch (keys or memory), gathered from every decoder
    step and handed on once, by ``_Tap``, after all the steps have run their backward."""

    def __init__(self) -> None:
        self.grad: Optional[torch.Tensor] = None  # what window gathers added in place
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # (L, R): the gradient is Σ Lᵀ R


class _Tap(torch.autograd.Function):
    """Identity whose backward adds what the steps left in ``_SourceGrad``. Autograd runs it after
    every step's backward, since all the steps consume its output."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, acc: _SourceGrad) -> torch.Tensor:
        ctx.acc = acc
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        acc = ctx.acc
        if acc.pairs:  # one (B, S, T) × (B, T, H) matmul for all T steps' outer products
            L = torch.cat([l for l, _ in acc.pairs], 1).to(grad.dtype)  # (B, T, S)
            R = torch.cat([r for _, r in acc.pairs], 1).to(grad.dtype)  # (B, T, H)
            grad = torch.baddbmm(grad, L.transpose(1, 2), R)
        if acc.grad is not None:
            grad = grad + acc.grad
        acc.grad, acc.pairs = None, []
        return grad, None


class _DeferredBmm(torch.autograd.Function):
    """``a @ xᵀ`` (scores from queries and keys) or ``a @ x`` (context from weights and memory) for
    one decoder step. Its backward computes a's gradient at once but leaves x's, an outer product
    per step that CPUs run slowly and that autograd would add into a full (B, S, H) tensor at
    every step, to ``_Tap``, which does all the steps in one matmul."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, x: torch.Tensor, acc: _SourceGrad, transpose: bool) -> torch.Tensor:
        ctx.save_for_backward(a, x)
        ctx.acc, ctx.transpose = acc, transpose
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        a, x = ctx.saved_tensors
        xg = x.to(g.dtype)
        if ctx.transpose:  # out = a xᵀ: da = g x, dx = gᵀ a
            grad_a = torch.bmm(g, xg)
            ctx.acc.pairs.append((g, a))
        else:  # out = a x: da = g xᵀ, dx = aᵀ g
            grad_a = torch.bmm(g, xg.transpose(1, 2))
            ctx.acc.pairs.append((a, g))
        return grad_a.to(a.dtype), None, None, None


class _WindowGather(torch.autograd.Function):
    """``x.gather(1, index)`` whose backward adds into the tapped tensor's accumulator: O(window)
    per step, where autograd's own gather backward writes a full (batch, src_len, hidden) tensor."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, acc: _SourceGrad) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.acc, ctx.shape = acc, x.shape
        return x.gather(1, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        if ctx.acc.grad is None:
            ctx.acc.grad = grad.new_zeros(ctx.shape)
        ctx.acc.grad.scatter_add_(1, index, grad)
        return None, None, None


def tap(x: torch.Tensor) -> torch.Tensor:
    """``x`` (keys or memory of a batch) prepared for the per-step attention ops above, whose
    gradients with respect to ``x`` are then summed once per batch instead of once per step."""
    out = _Tap.apply(x, acc := _SourceGrad())
    out._source_grad = acc  # read by _gather and _bmm
    return out


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    acc = getattr(x, "_source_grad", None)
    if acc is None or not torch.is_grad_enabled():
        return x.gather(1, index)
    return _WindowGather.apply(x, index, acc)


def _bmm(a: torch.Tensor, x: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """``a @ xᵀ`` or ``a @ x`` for (batch, T, ·) ``a`` and a source-side (batch, src_len, hidden) ``x``."""
    acc = getattr(x, "_source_grad", None)
    if acc is None or not torch.is_grad_enabled():
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)
    if torch.is_autocast_enabled(a.device.type):  # bmm runs in the autocast dtype, as torch.bmm would
        dtype = torch.get_autocast_dtype(a.device.type)
        a, x = a.to(dtype), x.to(dtype)
    return _DeferredBmm.apply(a, x, acc, transpose)


MODES = ("global", "local_m", "local_p")


class LuongAttention(nn.Module):
    def __init__(self, score: str, mode: str, hidden: int, window: int = 10, heads: int = 1, max_len: int = 256):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"attention score {score!r} is not one of {', '.join(SCORES)}")
        if mode not in MODES:
            raise ValueError(f"attention mode {mode!r} is not one of {', '.join(MODES)}")
        if heads > 1 and (score != "scaled_dot" or hidden % heads):
            raise ValueError(
                f"multi-head attention needs score scaled_dot and hidden size divisible by heads "
                f"(got score {score!r}, hidden {hidden}, heads {heads})"
            )
        self.score, self.mode, self.window, self.heads, self.max_len = score, mode, window, heads, max_len
        # local modes gather the 2D + 1 window instead of masking the whole source once the source
        # is this many windows long. On a 2-core CPU with hidden 256 gathering did not pay even
        # at 200 positions (scripts/benchmark_local.py): per-step op overhead dominates there.
        self.gather_above = 20.0
        # in training, sum the steps' gradients for keys and memory once per batch (see _Tap)
        self.defer_source_grads = True
        if heads > 1:
            self.W_q = nn.Linear(hidden, hidden, bias=False)
            self.W_k = nn.Linear(hidden, hidden, bias=False)
            self.W_v = nn.Linear(hidden, hidden, bias=False)
            self.W_o = nn.Linear(hidden, hidden, bias=False)
        elif score == "general":
            self.W_a = nn.Linear(hidden, hidden, bias=False)
        elif score == "concat":
            # W_a [h_t; h̄_s] = W_q h_t + W_k h̄_s : the two halves of one full matrix
            self.W_q = nn.Linear(hidden, hidden, bias=False)
            self.W_k = nn.Linear(hidden, hidden, bias=False)
            self.v_a = nn.Linear(hidden, 1, bias=False)
        elif score == "location":
            self.W_a = nn.Linear(hidden, max_len, bias=False)
        if mode == "local_p":
            self.W_p = nn.Linear(hidden, hidden, bias=False)
            self.v_p = nn.Linear(hidden, 1, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The step-independent half of the score: (batch, src_len, hidden), or keys and values
        side by side (batch, src_len, 2 hidden) for multi-head."""
        if self.heads > 1:
            return torch.cat([self.W_k(memory), self.W_v(memory)], -1)
        if self.score == "general":
            return self.W_a(memory)
        if self.score == "concat":
            return self.W_k(memory)
        return memory

    def forward(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        memory: torch.Tensor,
        mask: torch.Tensor,
        src_lens: torch.Tensor,
        positions: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """Attend from T decoder states at once (T = 1 inside the input-feeding loop).

        Args:
            query: (batch, T, hidden) decoder states h_t.
            keys: from ``keys(memory)``.
            memory: (batch, src_len, hidden) source states h̄_s (the values).
            mask: (batch, src_len) bool, True at real tokens.
            src_lens: (batch,) float source lengths S_i.
            positions: (T,) float target step indices t (used by local_m).
        Returns:
            context c_t (batch, T, hidden), weights a_t (batch, T, src_len) (the mean over
            heads for multi-head), and p_t (batch, T) for the local modes (None for global).
        """
        p = dist = None
        if self.mode != "global":
            if self.mode == "local_m":
                p = torch.minimum(positions.unsqueeze(0), (src_lens - 1).unsqueeze(1))  # (batch, T)
            else:
                gate = self.v_p(torch.tanh(self.W_p(query))).squeeze(-1)  # (batch, T)
                p = src_lens.unsqueeze(1) * torch.sigmoid(gate.float())  # (batch, T)
            if self.windowed(mask.size(1)):
                return self._local_window(query, keys, memory, mask, p)
        scores = self._scores(query, keys)  # (batch, [heads,] T, src_len)
        allowed = mask.unsqueeze(1)  # (batch, 1, src_len)
        if p is not None:
            s = torch.arange(mask.size(1), device=mask.device, dtype=p.dtype)  # (src_len,)
            dist = s.view(1, 1, -1) - p.unsqueeze(-1)  # (batch, T, src_len)
            allowed = allowed & (dist.abs() <= self.window)
        if self.heads > 1:  # every head shares the mask, the window and the Gaussian
            allowed = allowed.unsqueeze(1)
            dist = dist.unsqueeze(1) if dist is not None else None
        weights = torch.softmax(scores.float().masked_fill(~allowed, float("-inf")), dim=-1)
        if self.mode == "local_p":
            sigma = self.window / 2
            weights = weights * torch.exp(-(dist**2) / (2 * sigma**2))
        if self.heads == 1:
            weights = weights.to(memory.dtype)
            return _bmm(weights, memory), weights, p  # (batch, T, hidden)
        B, T, H = query.shape
        values = keys[..., H:].view(B, -1, self.heads, H // self.heads).transpose(1, 2)  # (B, heads, S, H/heads)
        context = (weights.to(values.dtype) @ values).transpose(1, 2).reshape(B, T, H)  # (B, T, H)
        return self.W_o(context), weights.mean(1).to(memory.dtype), p

    def windowed(self, src_len: int) -> bool:
        """Whether a local mode gathers the 2D + 1 window for sources this long (else it masks)."""
        return (self.mode != "global" and self.heads == 1 and self.score != "location"
                and src_len > self.gather_above * (2 * self.window + 1))

    def _local_window(
        self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor, p: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Local attention that touches only the 2D + 1 positions around p_t: O(D) per step, not O(S).

        Same weights and context as masking the full source, for sources much longer than the window.
        """
        B, T, H = query.shape
        S, W = mask.size(1), 2 * self.window + 1
        idx = torch.ceil(p - self.window).long().unsqueeze(-1) + torch.arange(W, device=p.device)  # (B, T, W)
        inside = (idx >= 0) & (idx < S) & ((idx - p.unsqueeze(-1)).abs() <= self.window)
        idx = idx.clamp(0, S - 1)
        inside = inside & mask.gather(1, idx.view(B, T * W)).view(B, T, W)
        flat = idx.view(B, T * W, 1).expand(-1, -1, H)
        k = _gather(keys, flat).view(B, T, W, H)  # (B, T, W, H)
        v = _gather(memory, flat).view(B, T, W, H)  # (B, T, W, H)
        if self.score == "concat":
            scores = self.v_a(torch.tanh(self.W_q(query).unsqueeze(2) + k)).squeeze(-1)  # (B, T, W)
        else:
            scores = (query.unsqueeze(2) * k).sum(-1)  # (B, T, W)
            if self.score == "scaled_dot":
                scores = scores / math.sqrt(H)
        w = torch.softmax(scores.float().masked_fill(~inside, float("-inf")), dim=-1)  # (B, T, W)
        if self.mode == "local_p":
            sigma = self.window / 2
            w = w * torch.exp(-((idx - p.unsqueeze(-1)) ** 2) / (2 * sigma**2))
        w = w.masked_fill(~inside, 0.0).to(memory.dtype)
        context = (w.unsqueeze(-1) * v).sum(2)  # (B, T, H)
        full = memory.new_zeros(B, T, S).scatter_add_(2, idx, w)  # (B, T, S) for callers that look
        return context, full, p

    def _scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        if self.heads > 1:
            B, T, H = query.shape
            d = H // self.heads
            q = self.W_q(query).view(B, T, self.heads, d).transpose(1, 2)  # (B, heads, T, d)
            k = keys[..., :H].view(B, -1, self.heads, d).transpose(1, 2)  # (B, heads, S, d)
            return q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, heads, T, S)
        if self.score == "concat":
            q = self.W_q(query)  # (batch, T, hidden)
            e = torch.tanh(q.unsqueeze(2) + keys.unsqueeze(1))  # (batch, T, src_len, hidden)
            return self.v_a(e).squeeze(-1)  # (batch, T, src_len)
        if self.score == "location":
            S = keys.size(1)
            scores = self.W_a(query)[..., :S]  # (batch, T, min(S, max_len))
            if S > self.max_len:  # positions past the maximum length cannot be attended to
                scores = nn.functional.pad(scores, (0, S - self.max_len), value=float("-inf"))
            return scores
        scores = _bmm(query, keys, transpose=True)  # (batch, T, src_len)
        return scores / math.sqrt(query.size(-1)) if self.score == "scaled_dot" else scores
