"""Corpus BLEU and chrF with sacrebleu (and its signatures): text in, scores out; no model, no torch."""

from __future__ import annotations

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
