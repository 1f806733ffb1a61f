"""Length-bucketed batches under a token budget, with padding: sorting by length keeps padding small
(random batches of 64 Tatoeba sentences carry about twice their real tokens)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional

import numpy as np
import torch

from nmt.vocab import BOS, EOS, PAD

if TYPE_CHECKING:  # datasets costs ~0.8 s of import: translate, evaluate and serve never load one
    import datasets


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
        """The model's tensors on ``device`` (not ``index``, ``host_lens``); to CUDA through pinned memory, not blocking."""
        cuda = device.type == "cuda"

        def pinned(v: torch.Tensor) -> torch.Tensor:  # only a host tensor can be pinned (a batch already there is moved as is)
            return v.pin_memory() if cuda and v.device.type == "cpu" and not v.is_pinned() else v

        return replace(self, **{name: pinned(v).to(device, non_blocking=cuda)
                                for name in ("src", "src_lens", "tgt_in", "tgt_out") if (v := getattr(self, name)) is not None})


def pad(seqs: Sequence[Sequence[int]], prefix: Sequence[int] = (), suffix: Sequence[int] = ()) -> torch.Tensor:
    """(len(seqs), max_len) long tensor, PAD-filled."""
    rows = [list(prefix) + list(s) + list(suffix) for s in seqs]
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(src: Sequence[Sequence[int]], tgt: Optional[Sequence[Sequence[int]]], index: Sequence[int]) -> Batch:
    # an empty source still needs one position to attend to: it becomes a single EOS
    src = [s if len(s) else [EOS] for s in src]
    lens = torch.tensor([len(s) for s in src], dtype=torch.long)
    tgt_in, tgt_out = (pad(tgt, prefix=[BOS]), pad(tgt, suffix=[EOS])) if tgt is not None else (None, None)
    return Batch(pad(src), lens, tgt_in, tgt_out, index=torch.tensor(list(index), dtype=torch.long), host_lens=lens.clone())


class Pairs:
    """Piece ids of aligned training pairs: Python lists, or a memory-mapped Arrow dataset (only its lengths in memory)."""

    def __init__(self, src_lens: np.ndarray, tgt_lens: np.ndarray, rows: Callable[[list[int]], tuple[list, list]]):
        self.src_lens, self.tgt_lens, self.rows = src_lens, tgt_lens, rows  # (pairs,) int32 each

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]) -> Pairs:
        lens = [np.fromiter(map(len, side), dtype=np.int32, count=len(side)) for side in (src, tgt)]
        return cls(*lens, lambda idx: ([src[i] for i in idx], [tgt[i] for i in idx]))

    @classmethod
    def from_dataset(cls, ds: datasets.Dataset) -> Pairs:
        """``ds`` has columns src_ids, tgt_ids, src_len, tgt_len (written by nmt.data.prepare)."""
        # a selected or shuffled view: its rows are not the table's. Private: datasets has no public test for an
        # indices mapping, and flatten_indices() on a plain table would copy a corpus of millions of rows for nothing
        if ds._indices is not None:
            ds = ds.flatten_indices()
        lens = [ds.data.column(c).to_numpy().astype(np.int32) for c in ("src_len", "tgt_len")]
        # Arrow's take on the memory-mapped columns: 0.4 ms for a batch of 70 pairs against
        # 1.5 ms through datasets' row access (a new Dataset object and fingerprint per call)
        src_ids, tgt_ids = ds.data.column("src_ids"), ds.data.column("tgt_ids")
        return cls(*lens, lambda idx: (src_ids.take(idx).to_pylist(), tgt_ids.take(idx).to_pylist()))

    def __len__(self) -> int:
        return len(self.src_lens)


def _cut(order: np.ndarray, cost: np.ndarray, batch_tokens: int, max_sentences: int) -> list[tuple[int, int]]:
    """Cut an ordered index array into [start, end) runs whose padded size fits the budget."""
    groups, start, longest = [], 0, 0
    for pos, c in enumerate(cost[order].tolist()):
        n = pos - start
        if n and (max(longest, c) * (n + 1) > batch_tokens or n >= max_sentences):
            groups.append((start, pos))
            start, longest = pos, 0
        longest = max(longest, c)
    if start < len(order):
        groups.append((start, len(order)))
    return groups


class Epoch(Sequence):
    """One epoch of training batches, made when indexed (an epoch of a large corpus is not held)."""

    def __init__(self, pairs: Pairs, order: np.ndarray, groups: list[tuple[int, int]]):
        self.pairs, self.order, self.groups = pairs, order, groups

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        idx = self.order[slice(*self.groups[i])].tolist()
        return make_batch(*self.pairs.rows(idx), idx)


def epoch_batches(pairs: Pairs, batch_tokens: int, rng: random.Random, max_sentences: int = 100_000) -> Epoch:
    """One epoch of batches: sorted by target then source length with random tie-breaks, in shuffled
    order; it depends only on ``rng`` (whose state a checkpoint keeps to resume mid-epoch)."""
    ties = np.random.default_rng(rng.getrandbits(63)).random(len(pairs))  # (pairs,)
    order = np.lexsort((ties, pairs.src_lens, pairs.tgt_lens))  # last key sorts first
    cost = np.maximum(pairs.src_lens, pairs.tgt_lens + 1)
    groups = _cut(order, cost, batch_tokens, max_sentences)
    rng.shuffle(groups)
    return Epoch(pairs, order, groups)


def train_batches(src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], batch_tokens: int, rng: random.Random,
                  max_sentences: int = 100_000) -> Epoch:
    """``epoch_batches`` over pairs held in lists."""
    return epoch_batches(Pairs.from_lists(src, tgt), batch_tokens, rng, max_sentences)


def inference_batches(src: Sequence[Sequence[int]], batch_tokens: int, max_sentences: int = 1000) -> list[Batch]:
    """Batches of sources sorted by length; ``Batch.index`` maps rows back to input order."""
    cost = np.asarray([max(len(s), 1) for s in src])
    order = np.argsort(cost, kind="stable")
    return [make_batch([src[i] for i in order[a:b]], None, order[a:b].tolist())
            for a, b in _cut(order, cost, batch_tokens, max_sentences)]
