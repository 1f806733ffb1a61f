"""A batch's search steps for one model or an ensemble (a list of models): the source encoded once, every model
advanced one step at a time, their output layers over any rows of the step (the search takes them in blocks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import torch

from nmt.batching import Batch
from nmt.decoder import select_state
from nmt.model import Seq2Seq

Models = Union[Seq2Seq, Sequence[Seq2Seq]]


class Stepper:
    """Encodes a batch once and advances every model of an ensemble by one step at a time."""

    def __init__(self, models: Models, batch: Batch, bf16_output: bool = False):
        self.models = [models] if isinstance(models, Seq2Seq) else list(models)
        self.bf16_output = bf16_output  # W_s in bf16, the rest as the caller runs it
        self.parts = []  # per model: [source, state, feed]
        for m in self.models:
            source, state = m.encode(batch.src, batch.src_lens, batch.host_lens)
            feed = source.memory.new_zeros(batch.size, 1, m.decoder.hidden)  # h̃_0
            self.parts.append([source, state, feed])

    def advance(self, y: torch.Tensor, position: torch.Tensor) -> Optional[torch.Tensor]:
        """Every model one step on from tokens y (rows,): the attention weights (rows, src_len) (an ensemble's mean)."""
        weights = []
        for m, part in zip(self.models, self.parts):
            part[2], part[1], a, _ = m.decoder.advance(y, part[2], part[1], part[0], position)
            weights.append(a.squeeze(1) if a is not None else None)
        if len(weights) == 1 or weights[0] is None:
            return weights[0]
        return torch.stack(weights).float().mean(0)

    def log_probs(self, start: int, end: int) -> torch.Tensor:
        """(rows, vocab) log-probabilities of the next token for rows start:end of the step taken (an ensemble's mean)."""
        logps = [m.decoder.log_probs(part[2][start:end], self.bf16_output) for m, part in zip(self.models, self.parts)]
        return logps[0] if len(logps) == 1 else torch.stack(logps).mean(0)

    def select(self, index: torch.Tensor, sentences: Optional[torch.Tensor] = None) -> None:
        """Keep rows ``index`` of the decoder states and, if given, sentences ``sentences`` of the encoder outputs. A
        decoder that ``shares_source`` (the fast engine) keeps them once per sentence, a beam's hypotheses together;
        the plain one gets a source row per row."""
        for m, part in zip(self.models, self.parts):
            if m.decoder.shares_source:
                if sentences is not None:
                    part[0] = part[0].select(sentences)
            else:
                part[0] = part[0].select(index)
            part[1] = select_state(part[1], index)
            part[2] = part[2].index_select(0, index)
