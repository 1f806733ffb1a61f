"""Luong attention in the fast engine: the paper's module (nmt/attention.py) with deferred source gradients, the
CPU's fast tanh, and beam search's hypotheses querying a source kept once per sentence."""

from __future__ import annotations

import math
from typing import Optional

import torch

from nmt.attention import LuongAttention
from nmt.engine import deferred, pointwise


class FastAttention(LuongAttention):
    """``LuongAttention`` with the same parameters and values (within fp32 rounding), faster.

    A query of k·batch rows (beam search: each sentence's k hypotheses, sentence by sentence) attends to a source
    kept once per sentence, as k·T steps of that sentence: one (k·T, hidden) product a sentence, not k copies of
    the source. The scores' and the context's products against a tapped source leave their gradients to the tap
    (nmt/engine/deferred.py), which sums every step's in one matmul per batch."""

    def forward(self, query: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor,
                src_lens: torch.Tensor, positions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        rows, k = query.size(0), query.size(0) // keys.size(0)
        if k == 1:
            return super().forward(query, keys, memory, mask, src_lens, positions)
        T = query.size(1)
        c, a, p = super().forward(query.reshape(-1, k * T, query.size(-1)), keys, memory, mask, src_lens,
                                  positions.repeat(k))  # (sentences, k·T, ·)
        return c.view(rows, T, -1), a.view(rows, T, -1), p.view(rows, T) if p is not None else None

    def context(self, weights: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return deferred.bmm(weights, memory)

    def position(self, query: torch.Tensor, src_lens: torch.Tensor, positions: torch.Tensor) -> Optional[torch.Tensor]:
        if self.mode != "local_p":
            return super().position(query, src_lens, positions)
        gate = self.v_p(pointwise.tanh(self.W_p(query))).squeeze(-1)  # (batch, T)
        return src_lens.unsqueeze(1) * torch.sigmoid(gate.float())

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        if self.score == "concat":  # v_aᵀ tanh(W_q h_t + W_k h̄_s)
            k = keys if keys.dim() == 4 else keys.unsqueeze(1)  # (batch, T or 1, S or W, d)
            return self.v_a(pointwise.tanh(self.W_q(query).unsqueeze(2) + k)).squeeze(-1)
        if keys.dim() == 4:  # a window per step
            return super().scores(query, keys)
        scores = deferred.bmm(query, keys, transpose=True)  # (batch, T, S)
        return scores / math.sqrt(query.size(-1)) if self.score == "scaled_dot" else scores
