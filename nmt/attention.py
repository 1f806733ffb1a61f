"""Luong attention (Luong, Pham & Manning 2015, https://aclanthology.org/D15-1166).

Scores between the decoder state h_t and each source state h̄_s:

    dot         h_tᵀ h̄_s
    general     h_tᵀ W_a h̄_s
    concat      v_aᵀ tanh(W_a [h_t; h̄_s])  with a full W_a (the paper's weak concat figures came
                                           from a variant with part of W_a fixed to the identity)
    location    a_t = softmax(W_a h_t) over a fixed maximum source length (the paper's baseline)
    scaled_dot  h_tᵀ h̄_s / √d  (Vaswani et al. 2017)
    heads = N   multi-head scaled dot, as torch.nn.MultiheadAttention without biases

Modes (for multi-head, the window and the Gaussian apply to every head):

    global   a_t = softmax over every real source position
    local_m  p_t = t, clamped to the last source position; softmax within [p_t - D, p_t + D]
    local_p  p_t = S_i · sigmoid(v_pᵀ tanh(W_p h_t)) with S_i the sentence's own length;
             a_t(s) = softmax-within-window(score)(s) · exp(-(s - p_t)² / (2σ²)), σ = D / 2

The source-side half of every score is computed once per batch (``keys``). Long sources in a
local mode gather the 2D + 1 window around p_t instead of masking the whole source.

Plain PyTorch, one query row per source row; the fast engine (nmt/engine/) subclasses it for its
deferred gradients and beam search's shared source.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from nmt.config import MODES, SCORES

# local modes gather the window once the source is this many windows long; on 2 CPU cores gathering did
# not pay even at 200 positions (record history_attention_local.json; its script retired after 303efda)
GATHER_ABOVE = 20.0


class LuongAttention(nn.Module):
    def __init__(self, score: str, mode: str, hidden: int, window: int = 10, heads: int = 1, max_len: int = 256,
                 gather_above: float = GATHER_ABOVE):
        super().__init__()
        for what, value, choices in (("score", score, SCORES), ("mode", mode, MODES)):
            if value not in choices:
                raise ValueError(f"attention {what} {value!r} is not one of {', '.join(choices)}")
        self.score, self.mode, self.window, self.heads, self.max_len = score, mode, window, heads, max_len
        self.gather_above = gather_above  # 0: always gather the window (local modes), inf: never
        if heads > 1 or score == "concat":  # concat: W_a [h_t; h̄_s] = W_q h_t + W_k h̄_s, one full matrix in two halves
            self.W_q = nn.Linear(hidden, hidden, bias=False)
            self.W_k = nn.Linear(hidden, hidden, bias=False)
        if heads > 1:
            self.W_v = nn.Linear(hidden, hidden, bias=False)
            self.W_o = nn.Linear(hidden, hidden, bias=False)
        elif score == "general":
            self.W_a = nn.Linear(hidden, hidden, bias=False)
        elif score == "concat":
            self.v_a = nn.Linear(hidden, 1, bias=False)
        elif score == "location":
            self.W_a = nn.Linear(hidden, max_len, bias=False)
        if mode == "local_p":
            self.W_p = nn.Linear(hidden, hidden, bias=False)
            self.v_p = nn.Linear(hidden, 1, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """The step-independent half of the score (batch, src_len, hidden); multi-head: keys and values (…, 2 hidden)."""
        if self.heads > 1:
            return torch.cat([self.W_k(memory), self.W_v(memory)], -1)
        if self.score == "general":
            return self.W_a(memory)
        if self.score == "concat":
            return self.W_k(memory)
        return memory

    def forward(self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor, src_lens: torch.Tensor,
                positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """Attend from T decoder states h_t (batch, T, hidden) at once (T = 1 in the input-feeding loop).

        ``keys`` from ``keys(memory)``; memory (batch, src_len, hidden) h̄_s; mask (batch, src_len) True at real
        tokens; src_lens (batch,) float S_i; positions (T,) float t. Returns c_t (batch, T, hidden), a_t (batch,
        T, src_len) (mean over heads) and p_t (batch, T) (None for global)."""
        p = self.position(query, src_lens, positions)  # (batch, T) or None
        if (p is not None and self.heads == 1 and self.score != "location"
                and mask.size(1) > self.gather_above * (2 * self.window + 1)):  # gather the window, don't mask
            return self._local_window(query, keys, memory, mask, p)
        allowed, dist = mask.unsqueeze(1), None  # (batch, 1, src_len)
        if p is not None:
            s = torch.arange(mask.size(1), device=mask.device, dtype=p.dtype)  # (src_len,)
            dist = s.view(1, 1, -1) - p.unsqueeze(-1)  # (batch, T, src_len)
        if self.heads == 1:
            weights = self.align(self._full_scores(query, keys), allowed, dist).to(memory.dtype)  # (batch, T, src_len)
            return self.context(weights, memory), weights, p  # (batch, T, hidden)
        # multi-head: every head shares the mask, the window and the Gaussian
        dist = dist.unsqueeze(1) if dist is not None else None  # (batch, 1, T, src_len)
        weights = self.align(self._full_scores(query, keys), allowed.unsqueeze(1), dist)  # (B, heads, T, S)
        B, T, H = query.shape
        values = keys[..., H:].view(B, -1, self.heads, H // self.heads).transpose(1, 2)  # (B, heads, S, H/heads)
        context = (weights.to(values.dtype) @ values).transpose(1, 2).reshape(B, T, H)  # (B, T, H)
        return self.W_o(context), weights.mean(1).to(memory.dtype), p

    def context(self, weights: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """c_t = Σ_s a_t(s) h̄_s: weights (batch, T, src_len) over memory (batch, src_len, hidden) -> (batch, T, hidden)."""
        return torch.bmm(weights, memory)

    def position(self, query: torch.Tensor, src_lens: torch.Tensor, positions: torch.Tensor) -> Optional[torch.Tensor]:
        """p_t (batch, T): t clamped to S_i - 1 (local_m), S_i · sigmoid(v_pᵀ tanh(W_p h_t)) (local_p), or None."""
        if self.mode == "local_m":
            return torch.minimum(positions.unsqueeze(0), (src_lens - 1).unsqueeze(1))
        if self.mode == "local_p":
            gate = self.v_p(torch.tanh(self.W_p(query))).squeeze(-1)  # (batch, T)
            return src_lens.unsqueeze(1) * torch.sigmoid(gate.float())
        return None

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """score(h_t, h̄_s) but location: query (batch, T, d) against keys (batch, S, d) → (batch, T, S),
        or against a window of keys per step (batch, T, W, d) → (batch, T, W)."""
        if self.score == "concat":  # v_aᵀ tanh(W_q h_t + W_k h̄_s)
            k = keys if keys.dim() == 4 else keys.unsqueeze(1)  # (batch, T or 1, S or W, d)
            return self.v_a(torch.tanh(self.W_q(query).unsqueeze(2) + k)).squeeze(-1)
        if keys.dim() == 4:  # a window per step
            scores = (query.unsqueeze(2) * keys).sum(-1)  # (batch, T, W)
        else:
            scores = torch.bmm(query, keys.transpose(1, 2))  # (batch, T, S)
        return scores / math.sqrt(query.size(-1)) if self.score == "scaled_dot" else scores

    def align(self, scores: torch.Tensor, allowed: torch.Tensor, dist: Optional[torch.Tensor]) -> torch.Tensor:
        """a_t: softmax of the scores over the allowed positions, for the local modes only those
        within D of p_t (``dist`` = s - p_t, None for global), times the Gaussian for local_p."""
        if dist is not None:
            allowed = allowed & (dist.abs() <= self.window)
        weights = torch.softmax(scores.float().masked_fill(~allowed, float("-inf")), dim=-1)
        if self.mode == "local_p":
            sigma = self.window / 2
            weights = weights * torch.exp(-(dist**2) / (2 * sigma**2))  # exp(-(s - p_t)² / (2σ²))
        return weights

    def _local_window(self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor,
                      p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Local attention over only the 2D + 1 positions around p_t: O(D) per step, not O(S); same result as masking."""
        B, T, H = query.shape
        S, W = mask.size(1), 2 * self.window + 1
        idx = torch.ceil(p - self.window).long().unsqueeze(-1) + torch.arange(W, device=p.device)  # (B, T, W)
        dist = idx - p.unsqueeze(-1)  # (B, T, W)
        real = (idx >= 0) & (idx < S)
        idx = idx.clamp(0, S - 1)
        real = real & mask.gather(1, idx.view(B, T * W)).view(B, T, W)
        flat = idx.view(B, T * W, 1).expand(-1, -1, H)
        k = keys.gather(1, flat).view(B, T, W, H)  # (B, T, W, H)
        v = memory.gather(1, flat).view(B, T, W, H)  # (B, T, W, H)
        w = self.align(self.scores(query, k), real, dist).to(memory.dtype)  # (B, T, W)
        context = (w.unsqueeze(-1) * v).sum(2)  # (B, T, H)
        full = memory.new_zeros(B, T, S).scatter_add_(2, idx, w)  # (B, T, S) for callers that look
        return context, full, p

    def _full_scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores against the whole source: (batch, T, src_len), or (batch, heads, T, src_len)."""
        if self.heads > 1:  # scaled dot per head
            B, T, H = query.shape
            S, d = keys.size(1), H // self.heads
            q = self.W_q(query).view(B, T, self.heads, d).transpose(1, 2)  # (B, heads, T, d)
            k = keys[..., :H].view(B, S, self.heads, d).transpose(1, 2)  # (B, heads, S, d)
            scores = self.scores(q.reshape(B * self.heads, T, d), k.reshape(B * self.heads, S, d))
            return scores.view(B, self.heads, T, S)
        if self.score == "location":  # W_a h_t over the positions
            S = keys.size(1)
            scores = self.W_a(query)[..., :S]  # (batch, T, min(S, max_len))
            if S > self.max_len:  # positions past the maximum length cannot be attended to
                scores = nn.functional.pad(scores, (0, S - self.max_len), value=float("-inf"))
            return scores
        return self.scores(query, keys)
