"""Decode an ``nmt.export --format onnx`` folder with onnxruntime, numpy and sentencepiece: no torch.

``python -m nmt.onnx_runtime OUT/ "你好。" --beam 5`` translates like ``nmt.translate``; in
Python::

    t = OnnxTranslator("OUT/")
    t.translate_nbest(["你好。"], beam=5, n_best=1)   # [[("Hello.", -0.41)]]

Greedy and beam search follow ``nmt/search.py`` step for step (beam: its three ``stop`` rules, the GNMT
length and coverage penalties), so they give the same output as PyTorch up to float rounding and ties.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import onnxruntime as ort
import sentencepiece as spm

from nmt.data.normalize import normalizer

NEG = np.float32(-np.inf)
SOURCE = ("memory", "keys", "mask", "lens", "src_lens")  # kept by sentence; the rest of a state by row
STOPS = ("exact", "full", "first")  # nmt.search.STOPS, without torch (tests/test_export.py checks they agree)


class OnnxTranslator:
    """The two graphs of an export, their tokenizers and normalization."""

    def __init__(self, folder: str | Path, threads: int = 0):
        folder = Path(folder)
        self.meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        self.encoder = ort.InferenceSession(str(folder / "encoder.onnx"), opts, providers=["CPUExecutionProvider"])
        self.step_graph = ort.InferenceSession(str(folder / "decoder_step.onnx"), opts, providers=["CPUExecutionProvider"])
        self.step_inputs = {i.name for i in self.step_graph.get_inputs()}
        self.src = spm.SentencePieceProcessor(model_file=str(folder / "spm.src.model"))
        self.tgt = spm.SentencePieceProcessor(model_file=str(folder / "spm.tgt.model"))
        self.normalize = normalizer(self.meta["normalization"]["opencc"])
        self.pad, self.bos, self.eos = self.meta["pad"], self.meta["bos"], self.meta["eos"]
        self.shared = bool(self.meta.get("shared_source"))  # False: an older export, one source row per state row

    # ------------------------------------------------------------------ graphs
    def encode(self, ids: list[list[int]]) -> dict:
        """Encoder outputs and the first decoder state for a batch of piece-id lists (non-empty)."""
        lens = np.array([len(s) for s in ids], dtype=np.int64)  # (batch,)
        src = np.full((len(ids), int(lens.max())), self.pad, dtype=np.int64)  # (batch, src_len)
        for i, s in enumerate(ids):
            src[i, : len(s)] = s
        memory, keys, mask, flens, h, c = self.encoder.run(None, {"src": src, "src_lens": lens})
        feed = np.zeros((len(ids), 1, self.meta["hidden"]), dtype=memory.dtype)  # h̃_0
        return {"memory": memory, "keys": keys, "mask": mask, "lens": flens, "h": h, "c": c, "feed": feed,
                "src_lens": lens}

    def step(self, st: dict, y: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Advance ``st`` in place by one token per row; log-probs (rows, vocab), attention, p_t."""
        given = {**st, "y": y.astype(np.int64), "position": np.array([t], dtype=np.float32)}
        feeds = {k: given[k] for k in self.step_inputs}  # the exporter drops inputs a graph does not use
        logp, st["feed"], st["h"], st["c"], att, centre = self.step_graph.run(None, feeds)
        return logp, att, centre

    def select(self, st: dict, rows: np.ndarray, sentences: Optional[np.ndarray] = None) -> dict:
        """Rows ``rows`` of the decoder state (h and c have them on axis 1) and, if given, sentences ``sentences`` of
        the source (a beam's hypotheses share their sentence's: ``shared_source`` in nmt/export_onnx.py). An older
        export's step takes a source row per state row: its sources follow ``rows``."""
        sentences = sentences if self.shared else rows
        return {k: ((v if sentences is None else v[sentences]) if k in SOURCE else v[:, rows] if k in ("h", "c")
                    else v[rows]) for k, v in st.items()}

    def limits(self, src_lens: np.ndarray) -> np.ndarray:
        """(batch,) output length limits, as ``nmt.search.max_lengths``."""
        m = self.meta["max_len"]
        return np.minimum((src_lens.astype(np.float32) * np.float32(m["ratio"]) + np.float32(m["extra"])).astype(np.int64),
                          m["cap"])

    def _mask(self, logp: np.ndarray, over: np.ndarray) -> None:
        """In place: no padding token; rows at their length limit can only end."""
        logp[:, self.pad] = NEG
        logp[over] = NEG
        logp[over, self.eos] = 0.0

    # ------------------------------------------------------------------ search
    def greedy(self, ids: list[list[int]]) -> list[tuple[list[int], float]]:
        """Greedy search: (tokens without EOS, summed log-probability) per sentence."""
        st = self.encode(ids)
        n = len(ids)
        limit = self.limits(st["src_lens"])
        T = int(limit.max())
        y = np.full(n, self.bos, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
        score = np.zeros(n, dtype=np.float32)
        tokens = np.full((n, T + 1), self.eos, dtype=np.int64)
        live = np.arange(n)
        for t in range(T + 1):
            logp, _, _ = self.step(st, y, t)
            self._mask(logp, t >= limit)
            y = logp.argmax(-1)  # (live,)
            score[live] += np.where(done, 0.0, logp[np.arange(len(y)), y]).astype(np.float32)
            y[done] = self.eos
            tokens[live, t] = y
            done = done | (y == self.eos)
            if done.all():
                break
            if 4 * done.sum() >= done.size:  # drop ended rows, as nmt.search.greedy
                keep = np.flatnonzero(~done)
                st = self.select(st, keep, keep)
                live, y, limit, done = live[keep], y[keep], limit[keep], done[keep]
        return [(_until(row, self.eos), float(s)) for row, s in zip(tokens.tolist(), score)]

    def beam(self, ids: list[list[int]], beam: int, alpha: float = 1.0, n_best: int = 1, stop: str = "full",
             beta: float = 0.0) -> list[list[tuple[list[int], float]]]:
        """Beam search: the n best (tokens, normalized score) per sentence; ``stop`` and ``beta`` (the coverage
        penalty) as ``nmt.search.beam_search``."""
        if stop not in STOPS:
            raise ValueError(f"stop must be one of {', '.join(STOPS)}, got {stop!r}")
        n, K = len(ids), beam
        enc = self.encode(ids)
        limit = self.limits(enc["src_lens"])
        # the first step runs on the sentences (one live hypothesis each: kr = 1 row), the beam's K rows from the
        # second on, as nmt.search; a vocabulary under 2K wide takes K rows from the start
        kr = 1 if self.tgt.get_piece_size() >= 2 * K else K
        st = self.select(enc, np.repeat(np.arange(n), kr))  # kr rows a sentence, its source once
        cov = _Coverage(beta, enc["src_lens"], kr)
        T = int(limit.max())
        fin_scores = np.full((n, K), NEG, dtype=np.float32)  # length-normalized, best first
        fin_seqs = np.full((n, K, T + 1), self.eos, dtype=np.int64)
        act = np.arange(n)
        alive = np.full((n, K), NEG, dtype=np.float32)
        alive[:, 0] = 0.0
        seqs = np.full((n, K, T + 1), self.eos, dtype=np.int64)
        y = np.full(n * kr, self.bos, dtype=np.int64)
        for t in range(T + 1):
            na = act.size
            logp, att, _ = self.step(st, y, t)
            V = logp.shape[1]
            self._mask(logp, np.repeat(t >= limit, kr))
            cand = (logp.reshape(na, kr, V) + alive[:, :kr, None]).reshape(na, kr * V)
            idx = _topk(cand, 2 * K)  # (na, 2K)
            top = np.take_along_axis(cand, idx, 1)
            origin, token = idx // V, idx % V
            is_eos = token == self.eos
            cov.add(att)
            if is_eos.any():
                new = np.where(is_eos, top / np.float32(_length_penalty(t + 1, alpha)) + cov.penalty(origin), NEG)
                prev = np.take_along_axis(seqs, origin[:, :, None], 1)  # (na, 2K, T+1); EOS at t
                both = np.concatenate([fin_scores[act], new], 1)
                keep = _topk(both, K)
                fin_scores[act] = np.take_along_axis(both, keep, 1)
                fin_seqs[act] = np.take_along_axis(np.concatenate([fin_seqs[act], prev], 1), keep[:, :, None], 1)
            pick = _topk(np.where(is_eos, NEG, top), K)  # (na, K): the best that did not end
            alive = np.take_along_axis(top, pick, 1)
            origin, token = np.take_along_axis(origin, pick, 1), np.take_along_axis(token, pick, 1)
            seqs = np.take_along_axis(seqs, origin[:, :, None], 1)
            seqs[:, :, t] = token
            done = _ended(stop, is_eos, fin_scores[act], alive, _length_penalty(limit + 1, alpha)) | (t >= limit)
            rows = (origin + np.arange(na)[:, None] * kr).reshape(-1)  # (na*K,) parents
            if done.all():
                break
            keep_s = None
            if done.any():
                keep_s = np.flatnonzero(~done)
                act, limit, alive, token = act[keep_s], limit[keep_s], alive[keep_s], token[keep_s]
                seqs, rows = seqs[keep_s], rows.reshape(na, K)[keep_s].reshape(-1)
            st = self.select(st, rows, keep_s)
            cov.select(rows)
            y, kr = token.reshape(-1), K
        return [[(_until(fin_seqs[i, k].tolist(), self.eos), float(fin_scores[i, k]))
                 for k in range(n_best) if k == 0 or fin_scores[i, k] > -1e30] for i in range(n)]

    # ------------------------------------------------------------------ text
    def translate_nbest(self, texts: Sequence[str], beam: int = 5, n_best: int = 1, alpha: float = 1.0,
                        batch_size: int = 64, stop: str = "full", beta: float = 0.0) -> list[list[tuple[str, float]]]:
        """As ``nmt.decode.translate_nbest``: n best (text, score) per line, empty lines give ("", 0)."""
        ids = [s[: self.meta["max_src_pieces"]] for s in self.src.encode([self.normalize(t) for t in texts])]
        out: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in texts]
        todo = sorted((i for i, s in enumerate(ids) if s), key=lambda i: len(ids[i]))
        for start in range(0, len(todo), batch_size):
            rows = todo[start : start + batch_size]
            batch = [ids[i] for i in rows]
            searched = beam > 1 or n_best > 1 or beta  # greedy otherwise, as nmt.search.beam_search
            hyps = self.beam(batch, beam, alpha, n_best, stop, beta) if searched else [[h] for h in self.greedy(batch)]
            for i, nbest in zip(rows, hyps):
                out[i] = [(self.decode(toks), score) for toks, score in nbest]
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """Detokenized text of target ids (special ids dropped)."""
        return self.tgt.decode([int(i) for i in ids if i > self.eos])

    def align(self, text: str, hyp: str) -> tuple[np.ndarray, Optional[np.ndarray], list[str], list[str]]:
        """As ``nmt.decode.align``: weights (tgt pieces + EOS, src pieces), p_t or None, the pieces."""
        src_ids = self.src.encode(self.normalize(text))[: self.meta["max_src_pieces"]] or [self.eos]
        tgt_ids = self.tgt.encode(hyp)
        st = self.encode([src_ids])
        rows, centres = [], []
        for t, y in enumerate([self.bos, *tgt_ids]):
            _, att, centre = self.step(st, np.array([y]), t)
            rows.append(att[0])
            centres.append(centre[0])
        pieces = [self.tgt.id_to_piece(i) for i in tgt_ids] + ["</s>"]
        c = np.array(centres) if self.meta["has_centre"] else None
        return np.stack(rows), c, [self.src.id_to_piece(i) for i in src_ids], pieces


class _Coverage:
    """The GNMT coverage penalty as ``nmt.search.beam_search`` keeps it: Σ_j a_ij per row (hypothesis) and source
    position, and which positions are real (not padding). With β = 0 it keeps nothing and adds 0."""

    def __init__(self, beta: float, src_lens: np.ndarray, kr: int):
        self.beta = np.float32(beta)
        if beta:
            real = np.arange(int(src_lens.max()))[None, :] < src_lens[:, None]  # (sentences, src_len)
            self.real = np.repeat(real, kr, 0)  # (rows, src_len)
            self.sums = np.zeros(self.real.shape, dtype=np.float32)

    def add(self, att: np.ndarray) -> None:
        """A step's attention weights (rows, src_len)."""
        if self.beta:
            self.sums = self.sums + att

    def penalty(self, origin: np.ndarray) -> np.ndarray | float:
        """β Σ_i log(min(Σ_j a_ij, 1)) over real positions (``nmt.search.coverage_penalty``) of the rows that the
        candidates ``origin`` (sentences, candidates) extend, by their row in the sentence."""
        if not self.beta:
            return 0.0
        pen = self.beta * np.log(np.clip(np.where(self.real, self.sums, 1.0), 1e-6, 1.0)).sum(-1)  # (rows,)
        return np.take_along_axis(pen.reshape(origin.shape[0], -1), origin, 1)

    def select(self, rows: np.ndarray) -> None:
        """Keep rows ``rows`` (a beam's parents, as the decoder state)."""
        if self.beta:
            self.sums, self.real = self.sums[rows], self.real[rows]


def _topk(x: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k largest values of each row, largest first."""
    part = np.argpartition(-x, k - 1, axis=1)[:, :k] if k < x.shape[1] else np.tile(np.arange(x.shape[1]), (x.shape[0], 1))
    order = np.argsort(-np.take_along_axis(x, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1)


def _length_penalty(length: int | np.ndarray, alpha: float) -> float | np.ndarray:
    """The GNMT length penalty ((5 + length) / 6) ** alpha, as ``nmt.search.length_penalty``."""
    return ((5.0 + length) / 6.0) ** alpha


def _ended(stop: str, is_eos: np.ndarray, fin: np.ndarray, alive: np.ndarray, best_lp: np.ndarray) -> np.ndarray:
    """(sentences,) those the ``stop`` rule ends, as ``nmt.search._ended``: is_eos (sentences, 2K) of the step's
    candidates, best first; fin and alive (sentences, K), best first; best_lp the length penalty at each limit."""
    if stop == "first":
        return is_eos[:, 0]  # the best candidate finished
    if stop == "full":
        return fin[:, -1] > NEG  # K hypotheses finished
    return fin[:, 0] >= alive[:, 0] / best_lp  # no live hypothesis can overtake the best finished one


def _until(seq: list[int], eos: int) -> list[int]:
    return seq[: seq.index(eos)] if eos in seq else seq


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt.onnx_runtime", description=__doc__.splitlines()[0])
    p.add_argument("folder", help="an nmt.export --format onnx folder")
    p.add_argument("text", nargs="*", help="sentences (default: lines of stdin)")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy")
    p.add_argument("--alpha", type=float, default=1.0, help="GNMT length penalty α (default 1.0)")
    p.add_argument("--beta", type=float, default=0.0, help="GNMT coverage penalty β, 0 to 1 (default 0: off)")
    p.add_argument("--stop", choices=STOPS, default="full", help="when a sentence's beam search ends (nmt.search.STOPS)")
    args = p.parse_args(argv)
    if not 0.0 <= args.beta <= 1.0:
        p.error(f"--beta: must be a number between 0 and 1, got {args.beta:g}")
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    texts = args.text or sys.stdin.read().splitlines()
    for nbest in OnnxTranslator(args.folder).translate_nbest(texts, beam=args.beam, alpha=args.alpha, beta=args.beta,
                                                             stop=args.stop):
        print(nbest[0][0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
