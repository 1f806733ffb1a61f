"""Decoding as functions: raw lines in, n-best translations, alignments or BLEU and chrF (sacrebleu, with
signatures) out. ``nmt.translator.Translator`` wraps them for every caller (commands, server, validation)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np
import torch

from nmt.batching import inference_batches, make_batch
from nmt.checkpoint import CheckpointError, load_model
from nmt.device import autocast
from nmt.metrics import Scores, score
from nmt.model import Seq2Seq
from nmt.search import Models, beam_search
from nmt.tokenizer import Tokenizer
from nmt.vocab import EOS

MAX_SRC_PIECES = 250  # longer inputs are cut: bounds time and memory per line


def translate_nbest(models: Models, tok: Tokenizer, normalize: Callable[[str], str], texts: Sequence[str], beam: int = 5,
                    alpha: float = 1.0, batch_tokens: int = 8000, device: torch.device = torch.device("cpu"), n_best: int = 1,
                    batch_sentences: int = 1000, beta: float = 0.0, stop: str = "full",
                    progress: Optional[Callable[[int], None]] = None, precision: str = "fp32") -> list[list[tuple[str, float]]]:
    """The ``n_best`` translations of each raw source line with their scores, best first, in input order;
    a line empty after normalization gets one empty translation. ``progress(n)`` hears of n lines done.
    ``precision`` bf16 decodes under autocast, bf16_output only the vocabulary projection in bf16 (scores stay
    fp32; outputs may differ slightly)."""
    ids = [s[:MAX_SRC_PIECES] for s in tok.encode_src([normalize(t) for t in texts])]
    out: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in texts]
    todo = [i for i, s in enumerate(ids) if s]
    if progress is not None and len(todo) < len(texts):
        progress(len(texts) - len(todo))
    group = [models] if isinstance(models, Seq2Seq) else list(models)
    was = [m.training for m in group]
    for m in group:
        m.eval()
    budget = max(batch_tokens // beam, MAX_SRC_PIECES)
    for batch in inference_batches([ids[i] for i in todo], budget, max(1, batch_sentences)):
        with autocast(device, precision):
            hyps = beam_search(group, batch.to(device), beam=beam, alpha=alpha, n_best=n_best, beta=beta, stop=stop,
                               bf16_output=precision == "bf16_output")
        for row, nbest in zip(batch.index.tolist(), hyps.nbest):
            out[todo[row]] = [(tok.decode_tgt(toks), score) for toks, score in nbest]
        if progress is not None:
            progress(batch.size)
    for m, training in zip(group, was):
        m.train(training)
    return out


def translate_texts(models: Models, tok: Tokenizer, normalize: Callable[[str], str], texts: Sequence[str],
                    **search) -> list[str]:
    """The best translation of each raw source line (``search``: keywords of ``translate_nbest``)."""
    return [h[0][0] for h in translate_nbest(models, tok, normalize, texts, **search)]


def align(model: Seq2Seq, tok: Tokenizer, src_text: str, hyp_text: str,
          device: torch.device = torch.device("cpu")) -> tuple[np.ndarray, Optional[np.ndarray], list[str], list[str]]:
    """Attention of ``model`` while it produces ``hyp_text`` from (normalized) ``src_text``:
    weights (tgt pieces + EOS, src pieces), the local centres p_t or None, and the pieces."""
    src_ids = tok.encode_src([src_text])[0][:MAX_SRC_PIECES] or [EOS]
    tgt_ids = tok.encode_tgt([hyp_text])[0]
    batch = make_batch([src_ids], [tgt_ids], [0]).to(device)
    was_training = model.training
    model.eval()
    weights, centres = model.align(batch.src, batch.src_lens, batch.host_lens, batch.tgt_in)
    model.train(was_training)
    c = centres[0].float().cpu().numpy() if centres is not None else None
    return weights[0].float().cpu().numpy(), c, [tok.src.id_to_piece(i) for i in src_ids], tok.tgt_pieces(tgt_ids) + ["</s>"]


def hard_alignment(weights: np.ndarray) -> str:
    """'i-j' pairs: each target piece j (EOS excluded) with its most attended source piece i."""
    return " ".join(f"{int(weights[j].argmax())}-{j}" for j in range(weights.shape[0] - 1))


def load_models(paths: Sequence[str], device: torch.device, precision: str = "fp32", engine: str = "fast"):
    """Models of one or more checkpoints (an ensemble needs one vocabulary), tokenizer, config; ``precision`` int8:
    quantized for int8 decoding on the CPU (nmt/int8.py, fast engine); ``engine``: nmt/build.py."""
    from nmt.int8 import load_int8  # torch.ao's quantized modules: only for int8

    if precision == "int8" and device.type != "cpu":
        raise ValueError(f"precision int8 runs on the CPU only (PyTorch's quantized kernels), not on {device}")
    models, tok, cfg = [], None, None
    for path in paths:
        model, t, c, _ = load_int8(path) if precision == "int8" else load_model(path, device, engine)
        if tok is None:
            tok, cfg = t, c
        elif t.to_state() != tok.to_state():
            raise CheckpointError(f"{path} uses other sentencepiece models than {paths[0]}: an ensemble needs one vocabulary")
        models.append(model)
    return models, tok, cfg


def evaluate(models: Models, tok: Tokenizer, normalize: Callable[[str], str], src: Sequence[str],
             refs: Sequence[Sequence[str]], tgt_lang: str = "en", beam: int = 1, **search) -> tuple[Scores, list[str]]:
    """Translate ``src`` (``search``: keywords of ``translate_nbest``) and score it against the reference streams."""
    hyps = translate_texts(models, tok, normalize, src, beam=beam, **search)
    return score(hyps, refs, tgt_lang), hyps
