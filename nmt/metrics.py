"""Corpus BLEU and chrF with sacrebleu (and its signatures), of a whole set or by source length: text in, scores out;
no model, no torch."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Scores:
    """Corpus BLEU and chrF with sacrebleu's signatures (and, from ``Translator.evaluate``, the hypotheses scored)."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    hypotheses: list[str] = field(default_factory=list, repr=False)


def score(hyps: Sequence[str], refs: Sequence[Sequence[str]], tgt_lang: str = "en") -> Scores:
    """``refs`` is a list of reference streams, each aligned with ``hyps``; sacrebleu's zh tokenizer for Chinese."""
    for i, r in enumerate(refs):
        if len(r) != len(hyps):
            raise ValueError(f"reference set {i + 1} has {len(r)} lines but there are {len(hyps)} hypotheses")
    if not hyps:
        raise ValueError("no hypotheses to score: sacrebleu needs at least one line")
    bleu, chrf = BLEU(tokenize="zh" if tgt_lang.startswith("zh") else "13a"), CHRF()
    hyps, refs = list(hyps), [list(r) for r in refs]
    b, c = bleu.corpus_score(hyps, refs), chrf.corpus_score(hyps, refs)
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()))


@dataclass(frozen=True)
class LengthBucket:
    """BLEU and chrF of the sentences whose source length falls in ``bucket`` ("1-10", "51+"; "0" for empty lines)."""

    bucket: str
    sentences: int
    bleu: float
    chrf: float


def bucket_label(length: int, edges: Sequence[int]) -> str:
    """The bucket of a source ``length`` for rising upper bounds ``edges``: (10, 20) gives 1-10, 11-20 and 21+."""
    if length <= 0:
        return "0"
    i = bisect.bisect_left(edges, length)  # the first edge >= length
    if i == len(edges):
        return f"{edges[-1] + 1}+"
    lo = edges[i - 1] + 1 if i else 1
    return str(lo) if lo == edges[i] else f"{lo}-{edges[i]}"


def by_length(hyps: Sequence[str], refs: Sequence[Sequence[str]], lengths: Sequence[int], edges: Sequence[int],
              tgt_lang: str = "en") -> list[LengthBucket]:
    """BLEU and chrF per source-length bucket (Luong et al. 2015, Figure 6), shortest first, empty buckets left out.
    ``lengths[i]`` is line i's source length; each bucket is scored by ``score`` (the whole set's sacrebleu settings),
    so one bucket holding every line gives the whole set's figures."""
    if len(lengths) != len(hyps):
        raise ValueError(f"{len(lengths)} source lengths but {len(hyps)} hypotheses")
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] < 1:
        raise ValueError(f"bucket edges must be rising positive integers, got {list(edges)}")
    order = ["0", *(bucket_label(e, edges) for e in edges), bucket_label(edges[-1] + 1, edges)]
    members: dict[str, list[int]] = {}
    for i, n in enumerate(lengths):
        members.setdefault(bucket_label(n, edges), []).append(i)
    out = []
    for label in (b for b in order if b in members):
        rows = members[label]
        s = score([hyps[i] for i in rows], [[r[i] for i in rows] for r in refs], tgt_lang)
        out.append(LengthBucket(label, len(rows), s.bleu, s.chrf))
    return out
