"""RNN encoder: embeddings -> (bi)LSTM/GRU over packed sequences -> memory and final state; and the
dropout encoder and decoder share."""

from __future__ import annotations

import re
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
    """Stacked (bi)directional RNN; a bidirectional encoder gives each direction half of ``hidden``.

    The layers are separate one-layer RNNs with this module's ``Dropout`` between them, not one ``nn.LSTM(layers,
    dropout)``: cuDNN keeps that inter-layer dropout's random state outside torch's generators, where no checkpoint
    can save it, so a resumed GPU run would draw other masks than the uninterrupted one. Here every mask comes from
    torch's RNG, which checkpoints hold.
    """

    def __init__(self, vocab: int, emb: int, hidden: int, layers: int, bidirectional: bool, rnn_type: str, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.dropout = Dropout(dropout)
        self.dirs, self.layers, self.output_size = 2 if bidirectional else 1, layers, hidden
        self.rnn = nn.ModuleList(RNNS[rnn_type](emb if k == 0 else hidden, hidden // self.dirs, 1, batch_first=True,
                                                bidirectional=bidirectional) for k in range(layers))
        self.register_load_state_dict_pre_hook(stacked_keys)

    def forward(self, src: torch.Tensor, host_lens: HostLens) -> tuple[torch.Tensor, object]:
        """Encode src (batch, src_len), host_lens on the CPU (for packing): memory (batch, src_len, hidden), zeros at
        padding, and the last state of every layer, directions concatenated ((layers, batch, hidden); a pair for LSTM)."""
        x = self.dropout(self.embed(src))  # (batch, src_len, emb)
        packed = pack_padded_sequence(x, host_lens, batch_first=True, enforce_sorted=False)
        finals = []
        for k, rnn in enumerate(self.rnn):
            if k:  # dropout between layers, on the packed steps only (no padding drawn)
                packed = packed._replace(data=self.dropout(packed.data))  # a PackedSequence is a namedtuple
            packed, final = rnn(packed)
            finals.append(final)
        memory, _ = pad_packed_sequence(packed, batch_first=True, total_length=src.size(1))
        if isinstance(finals[0], tuple):  # LSTM: (h, c), each (layers * dirs, batch, hidden/dirs)
            return memory, tuple(self._merge(torch.cat([f[i] for f in finals])) for i in range(2))
        return memory, self._merge(torch.cat(finals))

    def _merge(self, s: torch.Tensor) -> torch.Tensor:
        # (layers * dirs, batch, hidden/dirs) -> (layers, batch, hidden), the directions side by side
        return s.view(self.layers, self.dirs, *s.shape[1:]).transpose(1, 2).flatten(2)


def stacked_keys(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    """Checkpoints from before the layers were split name layer k's weights ``rnn.weight_ih_l{k}``: now
    ``rnn.{k}.weight_ih_l0`` (``_reverse`` kept)."""
    old = re.compile(re.escape(prefix) + r"rnn\.(weight|bias)_(ih|hh)_l(\d+)(_reverse)?$")
    for key in [k for k in state_dict if old.match(k)]:
        kind, gate, layer, rev = old.match(key).groups()
        state_dict[f"{prefix}rnn.{layer}.{kind}_{gate}_l0{rev or ''}"] = state_dict.pop(key)
