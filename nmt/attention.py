"""Luong attention (Luong, Pham & Manning 2015, https://aclanthology.org/D15-1166).

Scores between the decoder state h_t and each source state h̄_s:

    dot      h_tᵀ h̄_s
    general  h_tᵀ W_a h̄_s
    concat   v_aᵀ tanh(W_a [h_t; h̄_s])   with a full W_a (the paper's weak concat figures came
                                          from a variant with part of W_a fixed to the identity)

Modes:

    global   a_t = softmax over every real source position (padding masked to -inf)
    local_m  p_t = t; softmax within [p_t - D, p_t + D] ∩ [0, S_i - 1]; p_t is clamped to the
             last source position so that a long output still has a window to attend to
    local_p  p_t = S_i · sigmoid(v_pᵀ tanh(W_p h_t)) with S_i the sentence's own length;
             a_t(s) = softmax-within-window(score)(s) · exp(-(s - p_t)² / (2σ²)), σ = D / 2

The source-side half of every score (W_a h̄_s for general, the h̄_s half of concat) is
computed once per batch by ``keys`` and passed to every step.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class LuongAttention(nn.Module):
    def __init__(self, score: str, mode: str, hidden: int, window: int = 10):
        super().__init__()
        self.score, self.mode, self.window = score, mode, window
        if score == "general":
            self.W_a = nn.Linear(hidden, hidden, bias=False)
        elif score == "concat":
            # W_a [h_t; h̄_s] = W_q h_t + W_k h̄_s : the two halves of one full matrix
            self.W_q = nn.Linear(hidden, hidden, bias=False)
            self.W_k = nn.Linear(hidden, hidden, bias=False)
            self.v_a = nn.Linear(hidden, 1, bias=False)
        elif score != "dot":
            raise ValueError(f"attention score {score!r} is not one of dot, general, concat")
        if mode == "local_p":
            self.W_p = nn.Linear(hidden, hidden, bias=False)
            self.v_p = nn.Linear(hidden, 1, bias=False)
        elif mode not in ("global", "local_m"):
            raise ValueError(f"attention mode {mode!r} is not one of global, local_m, local_p")

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The step-independent half of the score. (batch, src_len, hidden) -> same shape."""
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
            keys: (batch, src_len, hidden) from ``keys(memory)``.
            memory: (batch, src_len, hidden) source states h̄_s (the values).
            mask: (batch, src_len) bool, True at real tokens.
            src_lens: (batch,) float source lengths S_i.
            positions: (T,) float target step indices t (used by local_m).
        Returns:
            context c_t (batch, T, hidden), weights a_t (batch, T, src_len),
            and p_t (batch, T) for the local modes (None for global).
        """
        scores = self._scores(query, keys)  # (batch, T, src_len)
        allowed = mask.unsqueeze(1)  # (batch, 1, src_len)
        p = None
        if self.mode != "global":
            if self.mode == "local_m":
                p = torch.minimum(positions.unsqueeze(0), (src_lens - 1).unsqueeze(1))  # (batch, T)
            else:
                gate = self.v_p(torch.tanh(self.W_p(query))).squeeze(-1)  # (batch, T)
                p = src_lens.unsqueeze(1) * torch.sigmoid(gate.float())  # (batch, T)
            s = torch.arange(keys.size(1), device=keys.device, dtype=p.dtype)  # (src_len,)
            dist = s.view(1, 1, -1) - p.unsqueeze(-1)  # (batch, T, src_len)
            allowed = allowed & (dist.abs() <= self.window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1)  # (batch, T, src_len)
        if self.mode == "local_p":
            sigma = self.window / 2
            weights = weights * torch.exp(-(dist**2) / (2 * sigma**2))
        weights = weights.to(memory.dtype)
        context = torch.bmm(weights, memory)  # (batch, T, hidden)
        return context, weights, p

    def _scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        if self.score == "concat":
            q = self.W_q(query)  # (batch, T, hidden)
            e = torch.tanh(q.unsqueeze(2) + keys.unsqueeze(1))  # (batch, T, src_len, hidden)
            return self.v_a(e).squeeze(-1)  # (batch, T, src_len)
        return torch.bmm(query, keys.transpose(1, 2))  # (batch, T, src_len)
