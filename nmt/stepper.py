"""Decoding one step at a time: every model of an ensemble (averaging their log-probabilities) advanced together
over the rows of a batch, which may grow (new sentences join) and shrink (ended ones leave)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import torch

from nmt.batching import Batch
from nmt.decoder import Source, select_state
from nmt.model import Seq2Seq

Models = Union[Seq2Seq, Sequence[Seq2Seq]]


def pad_to(x: torch.Tensor, width: int, value: float = 0) -> torch.Tensor:
    """(rows, w, ...) -> (rows, width, ...), ``value``-filled on the right."""
    if x.size(1) == width:
        return x
    out = x.new_full((x.size(0), width, *x.shape[2:]), value)
    out[:, : x.size(1)] = x
    return out


class Stepper:
    """Encodes a batch once and advances every model of an ensemble by one step at a time."""

    def __init__(self, models: Models, batch: Batch):
        self.models = [models] if isinstance(models, Seq2Seq) else list(models)
        self.parts = []  # per model: [source, state, feed]
        for m in self.models:
            source, state = m.encode(batch.src, batch.src_lens, batch.host_lens)
            feed = source.memory.new_zeros(batch.size, 1, m.decoder.hidden)  # h̃_0
            self.parts.append([source, state, feed])
        self.weights = [m.decoder.step_weights() for m in self.models]  # once, not at every step

    def step(self, y: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities (rows, vocab) of the next token and attention weights (rows, src_len)."""
        logps, weights = [], []
        for m, part, w in zip(self.models, self.parts, self.weights):
            logp, part[2], part[1], a, _ = m.decoder.step(y, part[2], part[1], part[0], position, w)
            logps.append(logp)
            weights.append(a.squeeze(1) if a is not None else None)
        if len(logps) == 1:
            return logps[0], weights[0]
        a = torch.stack(weights).float().mean(0) if weights[0] is not None else None
        return torch.stack(logps).mean(0), a

    def join(self, other: Stepper) -> None:
        """Append the rows of ``other`` (of the same models), padding the sources to the longer one."""
        for part, new in zip(self.parts, other.parts):
            a, b = part[0], new[0]
            S = max(a.mask.size(1), b.mask.size(1))
            pairs = ((a.memory, b.memory), (a.keys, b.keys), (a.mask, b.mask))
            part[0] = Source(*(torch.cat([pad_to(x, S), pad_to(y, S)]) for x, y in pairs), torch.cat([a.lens, b.lens]))
            s, t = part[1], new[1]  # (layers, rows, hidden), or an LSTM's pair of them
            part[1] = tuple(torch.cat(p, 1) for p in zip(s, t)) if isinstance(s, tuple) else torch.cat([s, t], 1)
            part[2] = torch.cat([part[2], new[2]])

    def select(self, index: torch.Tensor, sources: bool = False) -> None:
        """Keep rows ``index`` of the decoder states (and of the encoder outputs if ``sources``)."""
        for part in self.parts:
            if sources:
                part[0] = part[0].select(index)
            part[1] = select_state(part[1], index)
            part[2] = part[2].index_select(0, index)
