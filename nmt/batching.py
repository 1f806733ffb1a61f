"""Length-bucketed batches under a token budget, with padding.

Sorting by length before cutting batches keeps padding small (random batches of 64 Tatoeba
sentences carry about twice their real tokens); shuffling the batch order keeps SGD random.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Optional

import torch

from nmt.tokenizer import BOS, EOS, PAD


@dataclass
class Batch:
    src: torch.Tensor  # (batch, src_len) long, PAD after each sentence
    src_lens: torch.Tensor  # (batch,) long
    tgt_in: Optional[torch.Tensor] = None  # (batch, tgt_len) BOS y_1 .. y_n
    tgt_out: Optional[torch.Tensor] = None  # (batch, tgt_len) y_1 .. y_n EOS
    index: Optional[torch.Tensor] = None  # (batch,) positions in the unsorted input; stays on CPU
    host_lens: Optional[torch.Tensor] = None  # (batch,) CPU copy of src_lens, for packing

    @property
    def size(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device) -> Batch:
        nb = device.type == "cuda"
        moved = {
            f.name: (v.to(device, non_blocking=nb) if isinstance(v, torch.Tensor) and f.name not in ("index", "host_lens") else v)
            for f in fields(self)
            for v in [getattr(self, f.name)]
        }
        return Batch(**moved)


def pad(seqs: Sequence[Sequence[int]], prefix: Sequence[int] = (), suffix: Sequence[int] = ()) -> torch.Tensor:
    """(len(seqs), max_len) long tensor, PAD-filled."""
    rows = [list(prefix) + list(s) + list(suffix) for s in seqs]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(src: Sequence[Sequence[int]], tgt: Optional[Sequence[Sequence[int]]], index: Sequence[int]) -> Batch:
    # an empty source still needs one position to attend to: it becomes a single EOS
    src = [s if len(s) else [EOS] for s in src]
    b = Batch(
        src=pad(src),
        src_lens=torch.tensor([len(s) for s in src], dtype=torch.long),
        index=torch.tensor(list(index), dtype=torch.long),
    )
    b.host_lens = b.src_lens.clone()
    if tgt is not None:
        b.tgt_in = pad(tgt, prefix=[BOS])
        b.tgt_out = pad(tgt, suffix=[EOS])
    if torch.cuda.is_available():
        b = Batch(**{f.name: (v.pin_memory() if isinstance(v, torch.Tensor) else v)
                     for f in fields(b) for v in [getattr(b, f.name)]})
    return b


def _cut(order: list[int], cost_len: Sequence[int], batch_tokens: int, max_sentences: int) -> list[list[int]]:
    """Cut an ordered list of indices into groups whose padded size fits the budget."""
    groups, cur, longest = [], [], 0
    for i in order:
        new_longest = max(longest, cost_len[i])
        if cur and (new_longest * (len(cur) + 1) > batch_tokens or len(cur) >= max_sentences):
            groups.append(cur)
            cur, new_longest = [], cost_len[i]
        cur.append(i)
        longest = new_longest
    if cur:
        groups.append(cur)
    return groups


def train_batches(
    src: Sequence[Sequence[int]],
    tgt: Sequence[Sequence[int]],
    batch_tokens: int,
    rng: random.Random,
    max_sentences: int = 100_000,
) -> list[Batch]:
    """One epoch of batches: sorted by length with random tie-breaks, in shuffled order."""
    cost = [max(len(s), len(t) + 1) for s, t in zip(src, tgt)]
    keys = [(len(t), len(s), rng.random()) for s, t in zip(src, tgt)]
    order = sorted(range(len(src)), key=keys.__getitem__)
    groups = _cut(order, cost, batch_tokens, max_sentences)
    rng.shuffle(groups)
    return [make_batch([src[i] for i in g], [tgt[i] for i in g], g) for g in groups]


def inference_batches(src: Sequence[Sequence[int]], batch_tokens: int, max_sentences: int = 1000) -> list[Batch]:
    """Batches of sources sorted by length; ``Batch.index`` maps rows back to input order."""
    cost = [max(len(s), 1) for s in src]
    order = sorted(range(len(src)), key=cost.__getitem__)
    return [make_batch([src[i] for i in g], None, g) for g in _cut(order, cost, batch_tokens, max_sentences)]
