"""Subword regularization (Kudo, 2018): each training pair's segmentation sampled anew at batch time.

``tokenizer.sample_alpha > 0`` makes the training batches read the prepared corpus's text and segment it with
sentencepiece's sampling (unigram: ``alpha`` smooths the lattice's probabilities, ``sample_nbest`` candidates or -1
for all; BPE: ``alpha`` is the dropout probability). Dev, test and decoding keep the best segmentation. The
prepared corpus is the same with and without sampling (it holds the text beside the ids), so the setting is not
part of its cache key. Each batch's sampling is seeded by the run's seed and the batch's pairs, so a resumed run
draws what the uninterrupted one drew. A sampled side longer than ``data.max_tokens`` keeps its best segmentation.

Batches are cut before their pairs are sampled, by each pair's best lengths scaled by how much longer sampling makes
a side on average (``inflation``: measured at start-up on a seeded sample of pairs), so a batch holds about as many
real tokens as without sampling at any ``alpha`` (at 0.1 the recipe's English side comes out about 1.7× as many
pieces). Its padding grows: the sampled lengths of pairs sorted by their best lengths differ more.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence

import datasets
import numpy as np
import sentencepiece as spm

from nmt.batching import Pairs
from nmt.config import TokenizerConfig
from nmt.data.prepare import Prepared
from nmt.tokenizer import Tokenizer

log = logging.getLogger(__name__)


class SampledRows:
    """``Pairs.rows`` for subword regularization: the pairs ``idx`` as sampled piece ids."""

    def __init__(self, train: datasets.Dataset, tok: Tokenizer, alpha: float, nbest: int, max_tokens: int, seed: int):
        cols = train.data
        self.text = cols.column("src"), cols.column("tgt")
        self.best = cols.column("src_ids"), cols.column("tgt_ids")
        self.sp = [spm.SentencePieceProcessor(model_proto=m) for m in (tok.src_model, tok.tgt_model)]
        self.alpha, self.nbest, self.max_tokens, self.seed = alpha, nbest, max_tokens, seed

    def __call__(self, idx: Sequence[int]) -> tuple[list, list]:
        spm.set_random_generator_seed(zlib.crc32(np.asarray(idx, dtype=np.int64).tobytes(), self.seed))
        sides = []
        for sp, text, best in zip(self.sp, self.text, self.best):
            sampled = sp.encode(text.take(idx).to_pylist(), enable_sampling=True, alpha=self.alpha,
                                nbest_size=self.nbest, num_threads=1)  # one thread: the seed decides the draw
            fallback = best.take(idx).to_pylist()
            sides.append([s if len(s) <= self.max_tokens else b for s, b in zip(sampled, fallback)])
        return sides[0], sides[1]


INFLATION_SAMPLE = 2000  # pairs sampled at start-up to measure how much longer sampling makes each side


def inflation(rows: SampledRows, best: Pairs, seed: int) -> tuple[float, float]:
    """Mean sampled length over mean best length, per side, on a seeded sample of pairs (the same every start)."""
    n = len(best)
    idx = np.sort(np.random.default_rng(seed).choice(n, size=min(INFLATION_SAMPLE, n), replace=False)).tolist()
    src, tgt = rows(idx)
    return (sum(map(len, src)) / max(1, int(best.src_lens[idx].sum())),
            sum(map(len, tgt)) / max(1, int(best.tgt_lens[idx].sum())))


def training_pairs(prepared: Prepared, tok_cfg: TokenizerConfig, max_tokens: int, seed: int) -> Pairs:
    """The pairs training draws its batches from: the prepared ids, or with ``sample_alpha`` sampled anew (their
    lengths, which cut the batches, scaled by the measured ``inflation``)."""
    if not tok_cfg.sample_alpha:
        return prepared.train
    train = datasets.load_from_disk(str(prepared.folder / "train"))  # memory-mapped, as prepared.train
    rows = SampledRows(train, prepared.tokenizer, tok_cfg.sample_alpha, tok_cfg.sample_nbest, max_tokens, seed)
    best = prepared.train
    src_x, tgt_x = inflation(rows, best, seed)
    log.info("subword sampling (alpha %g): sides %.2fx and %.2fx as many pieces; batches cut by best lengths times these",
             tok_cfg.sample_alpha, src_x, tgt_x)
    scaled = [np.minimum(np.ceil(lens * x), max_tokens).astype(np.int32) for lens, x in
              ((best.src_lens, src_x), (best.tgt_lens, tgt_x))]  # a side over max_tokens keeps its best segmentation
    return Pairs(scaled[0], scaled[1], rows)
