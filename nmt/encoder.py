"""RNN encoder: embeddings -> (bi)LSTM/GRU over packed sequences -> memory and final state; and the
dropout encoder and decoder share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.vocab import PAD

RNNS = {"lstm": nn.LSTM, "gru": nn.GRU}
HostLens = Union[torch.Tensor, Sequence[int]]  # (batch,) source lengths on the CPU: a CPU tensor or ints


class Dropout(nn.Dropout):
    """``nn.Dropout`` with its CPU mask from ``torch.rand``: ``bernoulli_`` draws about 9 ns an element against
    under 4 ns (2 threads), about 6 % of a bench-small training step. Other devices keep torch's kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        if self.p == 1.0:
            return x * 0.0
        keep = torch.rand(x.shape, device=x.device) >= self.p  # float32 draws, whatever x's dtype
        return x * keep.to(x.dtype).mul_(1.0 / (1.0 - self.p))


class Encoder(nn.Module):
    """Stacked (bi)directional RNN; a bidirectional encoder gives each direction half of ``hidden``."""

    def __init__(self, vocab: int, emb: int, hidden: int, layers: int, bidirectional: bool, rnn_type: str, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.dropout = Dropout(dropout)
        self.dirs, self.layers, self.output_size = 2 if bidirectional else 1, layers, hidden
        self.rnn = RNNS[rnn_type](emb, hidden // self.dirs, layers, batch_first=True, bidirectional=bidirectional,
                                  dropout=dropout if layers > 1 else 0.0)

    def forward(self, src: torch.Tensor, host_lens: HostLens) -> tuple[torch.Tensor, object]:
        """Encode src (batch, src_len), host_lens on the CPU (for packing): memory (batch, src_len, hidden), zeros at
        padding, and the last state of every layer, directions concatenated ((layers, batch, hidden); a pair for LSTM)."""
        x = self.dropout(self.embed(src))  # (batch, src_len, emb)
        packed = pack_padded_sequence(x, host_lens, batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return memory, tuple(self._merge(s) for s in final) if isinstance(final, tuple) else self._merge(final)

    def _merge(self, s: torch.Tensor) -> torch.Tensor:
        # (layers * dirs, batch, hidden/dirs) -> (layers, batch, hidden), the directions side by side
        return s.view(self.layers, self.dirs, *s.shape[1:]).transpose(1, 2).flatten(2)
