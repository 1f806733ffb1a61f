"""The models a server holds: a PyTorch checkpoint or an ONNX export, behind one ``translate``.

``translate(texts, beam, n_best, attention, alpha, beta, stop)`` gives one result per line (the search's settings
as ``nmt.translate``'s)::

    {"src": line, "tgt": best, "score": s, "n_best": [{"tgt": …, "score": …}, …],
     "attention": {"src_pieces": [...], "tgt_pieces": [... "</s>"], "weights": [[...]] (tgt × src),
                   "p_t": [...] or None, "window": D or None}}        # only when asked

Torch is imported only by ``TorchEngine``, so a server of ONNX models runs without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol

import numpy as np


class Engine(Protocol):
    info: dict

    def translate(self, texts: Sequence[str], beam: int, n_best: int, attention: bool, alpha: float = 1.0,
                  beta: float = 0.0, stop: str = "full") -> list[dict]: ...


def result(src: str, nbest: Sequence[tuple[str, float]], attention: Optional[dict] = None) -> dict:
    """One line's answer (scores rounded to 4 decimals)."""
    out = {"src": src, "tgt": nbest[0][0], "score": round(float(nbest[0][1]), 4),
           "n_best": [{"tgt": t, "score": round(float(s), 4)} for t, s in nbest]}
    if attention is not None:
        out["attention"] = attention
    return out


def attention_json(weights: np.ndarray, centres: Optional[np.ndarray], src_pieces: list[str], tgt_pieces: list[str],
                   window: Optional[int]) -> dict:
    """weights: (tgt pieces + EOS, src pieces); centres: (tgt pieces + EOS,) p_t or None."""
    return {"src_pieces": src_pieces, "tgt_pieces": tgt_pieces,
            "weights": np.round(weights.astype(np.float64), 4).tolist(),
            "p_t": None if centres is None else np.round(centres.astype(np.float64), 3).tolist(),
            "window": window if centres is not None else None}


class TorchEngine:
    """A checkpoint decoded with ``nmt.translate`` (the same search as the command line). ``threads``:
    intra-op threads of each decoding thread (0: all cores), set there by ``use_threads``."""

    def __init__(self, path: str, device: str = "auto", precision: str = "fp32", threads: int = 0):
        from nmt.device import available_cores, keep_freed_memory, warn_slow_bf16
        from nmt.translator import Translator

        keep_freed_memory()
        self.threads = max(1, threads or available_cores())
        self.translator = Translator.load(path, device, precision)
        warn_slow_bf16(self.translator.device, precision)
        self.cfg = self.translator.config
        a = self.cfg.model.attention
        self.info = {"name": str(path), "backend": "torch", "src_lang": self.cfg.data.src_lang,
                     "tgt_lang": self.cfg.data.tgt_lang, "precision": precision,
                     "attention": {"score": a.score, "mode": a.mode, "window": a.window}}

    def use_threads(self) -> None:
        """Give the calling (decoding) thread its intra-op threads."""
        import torch

        torch.set_num_threads(self.threads)

    def translate(self, texts: Sequence[str], beam: int, n_best: int, attention: bool, alpha: float = 1.0,
                  beta: float = 0.0, stop: str = "full") -> list[dict]:
        """One result per line, decoded by ``Translator.translate`` with these settings."""
        out = []
        for t in self.translator.translate(texts, beam=beam, n_best=n_best, attention=attention, alpha=alpha, beta=beta,
                                           stop=stop):
            a = t.attention
            att = attention_json(a.weights, a.centres, a.src_pieces, a.tgt_pieces, self.cfg.model.attention.window) if a else None
            out.append(result(t.source, [(h.text, h.score) for h in t.nbest], att))
        return out


class OnnxEngine:
    """An ``nmt.export --format onnx`` folder decoded with onnxruntime and numpy only."""

    def __init__(self, folder: str, threads: int = 0):
        from nmt.onnx_runtime import OnnxTranslator

        self.translator = OnnxTranslator(folder, threads)
        meta = self.translator.meta
        self.info = {"name": str(folder), "backend": "onnx", "src_lang": meta["src_lang"], "tgt_lang": meta["tgt_lang"],
                     "attention": {"score": meta["score"], "mode": meta["mode"], "window": meta["window"]}}

    def translate(self, texts: Sequence[str], beam: int, n_best: int, attention: bool, alpha: float = 1.0,
                  beta: float = 0.0, stop: str = "full") -> list[dict]:
        """One result per line, decoded by ``OnnxTranslator.translate_nbest`` with these settings."""
        nbests = self.translator.translate_nbest(texts, beam=beam, n_best=n_best, alpha=alpha, beta=beta, stop=stop)
        out = []
        for text, nbest in zip(texts, nbests):
            att = None
            if attention:
                w, c, src_p, tgt_p = self.translator.align(text, nbest[0][0])
                att = attention_json(w, c, src_p, tgt_p, self.translator.meta["window"])
            out.append(result(text, nbest, att))
        return out
