"""The output layer tied to the target embeddings (Press & Wolf, 2017; Inan et al., 2017): W_s = E.

p(y_t | ·) = softmax(E P h̃_t + b), E the decoder's (vocab, emb) embedding matrix, P a (emb, hidden) projection
that exists only when ``model.emb_size`` differs from ``model.hidden_size``. One matrix fewer to learn: on a
small corpus the embeddings get the output layer's gradient at every token.
"""

from __future__ import annotations

import torch
from torch import nn


class TiedOutput(nn.Module):
    """``Decoder.out`` when ``model.tie_embeddings`` is decoder or all: logits from the embedding matrix itself."""

    def __init__(self, embed: nn.Embedding, hidden: int):
        super().__init__()
        vocab, emb = embed.weight.shape
        self.embed = embed  # shared: the same Parameter as the decoder's input embeddings
        self.proj = nn.Linear(hidden, emb, bias=False) if hidden != emb else None  # P
        self.bias = nn.Parameter(torch.zeros(vocab))  # b
        self.out_features = vocab

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h̃ (..., hidden) -> logits (..., vocab)."""
        return nn.functional.linear(self.proj(h) if self.proj is not None else h, self.embed.weight, self.bias)
