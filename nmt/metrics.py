"""Corpus BLEU and chrF with sacrebleu on detokenized text, with reproducible signatures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def score(hyps: Sequence[str], refs: Sequence[Sequence[str]], tgt_lang: str = "en") -> Scores:
    """``refs`` is a list of reference streams, each aligned with ``hyps``; sacrebleu's zh tokenizer for Chinese."""
    for i, r in enumerate(refs):
        if len(r) != len(hyps):
            raise ValueError(f"reference set {i + 1} has {len(r)} lines but there are {len(hyps)} hypotheses")
    bleu = BLEU(tokenize="zh" if tgt_lang.startswith("zh") else "13a")
    chrf = CHRF()
    b = bleu.corpus_score(list(hyps), [list(r) for r in refs])
    c = chrf.corpus_score(list(hyps), [list(r) for r in refs])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()))
