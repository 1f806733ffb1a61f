"""The Python API: ``from nmt import Translator``.

    tr = Translator.load("outputs/demo", device="cpu")
    for t in tr.translate(["我爱你。"], beam=5, n_best=2):
        print(t.text, t.score, [(h.text, h.score) for h in t.nbest])
    scores = tr.evaluate(["我爱你。"], [["I love you."]])     # BLEU, chrF, signatures, hypotheses

``Translator.load`` sets the process up as the commands do (a thread per core, glibc keeping freed blocks:
``nmt.device.setup_process``), unless ``nmt.device.set_threads`` already ran; ``setup_process=False`` leaves threads
and the allocator to a caller that manages them itself. ``Translator(...)`` itself sets nothing up.

One model (or an ensemble sharing one vocabulary) with its tokenizer and normalization: raw lines in,
translations, n-best lists, attention and scores out. ``nmt.translate``, ``nmt.evaluate``, the server's
torch engine and training's validation all decode through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from nmt.data.normalize import src_normalizer
from nmt.decode import align, load_models, translate_nbest
from nmt.device import PRECISIONS, pick_device
from nmt.device import setup_process as setup_threads_and_memory
from nmt.metrics import Scores, score
from nmt.model import Seq2Seq
from nmt.search import STOPS
from nmt.tokenizer import Tokenizer


@dataclass(frozen=True)
class Hypothesis:
    """One translation of a line and its score (the search's: log-probability with the length and coverage penalties)."""

    text: str
    score: float


@dataclass(frozen=True)
class Attention:
    """Where the model looked while it wrote the best translation."""

    weights: np.ndarray  # (target pieces + </s>, source pieces)
    src_pieces: list[str]
    tgt_pieces: list[str]  # the translation's pieces and "</s>"
    centres: Optional[np.ndarray]  # (target pieces + </s>,) p_t of the local modes; None for global attention


@dataclass(frozen=True)
class Translation:
    """A source line's translations, best first (one unless ``n_best`` asked for more), and its attention if asked."""

    source: str
    nbest: list[Hypothesis]
    attention: Optional[Attention] = None

    @property
    def text(self) -> str:
        return self.nbest[0].text

    @property
    def score(self) -> float:
        return self.nbest[0].score


@dataclass(frozen=True)
class SearchSettings:
    """How to search: beam size (1 = greedy), n-best, GNMT length (alpha) and coverage (beta) penalties, when a
    sentence's search ends (nmt.search.STOPS) and the batch limits."""

    beam: int = 5
    n_best: int = 1
    alpha: float = 1.0
    beta: float = 0.0
    stop: str = "full"
    batch_tokens: int = 8000  # source tokens × beam per batch
    batch_sentences: int = 1000

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ValueError(f"beam={self.beam}: must be >= 1")
        if not 1 <= self.n_best <= self.beam:
            raise ValueError(f"n_best={self.n_best}: must be between 1 and beam ({self.beam})")
        if self.stop not in STOPS:
            raise ValueError(f"stop={self.stop!r}: choose one of {', '.join(STOPS)}")


def _int8_ready(model: Seq2Seq) -> bool:
    return getattr(model.decoder, "int8", None) is not None  # nmt.int8.quantize packed its matmuls


class Translator:
    """A trained model ready to translate: ``Translator.load(run_or_checkpoint)``, then ``translate`` or ``evaluate``."""

    def __init__(self, models: Union[Seq2Seq, Sequence[Seq2Seq]], tokenizer: Tokenizer, config: Any,
                 device: torch.device = torch.device("cpu"), precision: str = "fp32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
        self.models = [models] if isinstance(models, Seq2Seq) else list(models)
        if precision == "int8" and not all(_int8_ready(m) for m in self.models):
            raise ValueError("precision='int8' needs quantized models: Translator.load(..., precision='int8'), "
                             "or nmt.int8.load_int8")
        self.tokenizer, self.config, self.device, self.precision = tokenizer, config, device, precision
        self.normalize: Callable[[str], str] = src_normalizer(config.data)

    @classmethod
    def load(cls, model: Union[str, Path, Sequence[Union[str, Path]]], device: str = "auto",
             precision: str = "fp32", setup_process: bool = True) -> Translator:
        """A run folder (its ``checkpoints/best.pt``) or checkpoint file, or several to ensemble (one vocabulary);
        ``device``: auto, cpu, cuda, cuda:N; ``precision``: fp32, bf16, bf16_output or int8 (nmt.device.PRECISIONS;
        int8 on the CPU only, where ``auto`` picks it). ``setup_process``: first set the process up as the commands
        do, so the API decodes as fast as they do (``nmt.device.setup_process``: a thread per core and glibc keeping
        freed blocks, unless ``set_threads`` already ran); False touches neither threads nor the allocator."""
        if setup_process:
            setup_threads_and_memory()
        paths = [str(model)] if isinstance(model, (str, Path)) else [str(p) for p in model]
        dev = torch.device("cpu") if precision == "int8" and device == "auto" else pick_device(device)
        models, tok, cfg = load_models(paths, dev, precision)
        return cls(models, tok, cfg, dev, precision)

    @property
    def tgt_lang(self) -> str:
        return self.config.data.tgt_lang

    def translate(self, texts: Sequence[str], beam: int = 5, n_best: int = 1, attention: bool = False,
                  progress: Optional[Callable[[int], None]] = None, **search: Any) -> list[Translation]:
        """Each raw line's translations, in input order (a line empty after normalization: one empty translation).
        ``search``: more ``SearchSettings`` (alpha, beta, stop, batch_tokens, batch_sentences); ``progress(n)``
        hears of n lines done; ``attention``: the first model's attention over the best translation."""
        s = SearchSettings(beam=beam, n_best=n_best, **search)
        nbests = translate_nbest(self.models, self.tokenizer, self.normalize, texts, beam=s.beam, alpha=s.alpha,
                                 batch_tokens=s.batch_tokens, device=self.device, n_best=s.n_best,
                                 batch_sentences=s.batch_sentences, beta=s.beta, stop=s.stop, progress=progress,
                                 precision=self.precision)
        out = []
        for text, nbest in zip(texts, nbests):
            att = self.attention(text, nbest[0][0]) if attention else None
            out.append(Translation(text, [Hypothesis(t, float(sc)) for t, sc in nbest], att))
        return out

    def attention(self, text: str, translation: str) -> Attention:
        """The first model's attention while it writes ``translation`` of the raw line ``text`` (teacher-forced)."""
        w, centres, src_pieces, tgt_pieces = align(self.models[0], self.tokenizer, self.normalize(text), translation,
                                                   self.device)
        return Attention(w, src_pieces, tgt_pieces, centres)

    def evaluate(self, src: Sequence[str], refs: Sequence[Sequence[str]], beam: int = 5,
                 progress: Optional[Callable[[int], None]] = None, **search: Any) -> Scores:
        """Translate ``src`` and score it against one or more reference streams (each as long as ``src``): BLEU and
        chrF with sacrebleu's signatures (its zh tokenizer for a Chinese target), and the hypotheses."""
        if not src:
            raise ValueError("no source lines: nothing to score")
        hyps = [t.text for t in self.translate(src, beam=beam, progress=progress, **search)]
        return dataclasses.replace(score(hyps, refs, self.tgt_lang), hypotheses=hyps)
