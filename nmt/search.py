"""Greedy and beam search over a batch, all sentences (× beams) in one tensor, for one model or an
ensemble (a list of models, decoding with the average of their log-probabilities)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

import torch

from nmt.batching import Batch
from nmt.stepper import Models, Stepper, pad_to
from nmt.vocab import BOS, EOS, PAD

# When a sentence's beam search ends (``stop``):
#   exact  no live hypothesis can still beat the best finished one (the best under the length
#          penalty that a beam of this size can find; decodes longest)
#   full   ``beam`` hypotheses have finished (fairseq)
#   first  the best candidate of a step is a finished one (OpenNMT-py, Joey NMT; fastest)
STOPS = ("exact", "full", "first")


def sync_interval(device: torch.device) -> int:
    """Steps between the search loops' host syncs (where ended rows leave): free on the CPU; on a GPU
    each drains the kernel queue, so ended rows ride along, masked, for a few steps."""
    return 1 if device.type == "cpu" else 8


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # best hypothesis per sentence, without EOS, in batch order
    scores: list[float]  # its log-probability (length-normalized for beam search)
    nbest: list[list[tuple[list[int], float]]]  # per sentence, best first


def max_lengths(src_lens: torch.Tensor, ratio: float, extra: int, cap: int) -> torch.Tensor:
    """(batch,) output length limits: ratio · source length + extra, at most ``cap``."""
    return (src_lens.float() * ratio + extra).long().clamp(max=cap)


def _force_eos(logp: torch.Tensor, rows: torch.Tensor) -> None:
    """In place: rows (a bool mask) that reached their length limit can only end."""
    if logp.device.type != "cpu":  # a boolean index would sync with the host
        logp.masked_fill_(rows.unsqueeze(1), float("-inf"))
        logp[:, EOS].masked_fill_(rows, 0.0)
        return
    logp[rows] = float("-inf")
    logp[rows, EOS] = 0.0


@torch.no_grad()
def greedy(model: Models, batch: Batch, ratio: float = 2.0, extra: int = 10, cap: int = 200, sync_every: int = 0) -> Hypotheses:
    """Batched greedy search; ended rows leave when a quarter of the batch, checked every ``sync_every`` steps."""
    stepper = Stepper(model, batch)
    n, dev = batch.size, batch.src.device
    every = sync_every or sync_interval(dev)
    limit = max_lengths(batch.src_lens, ratio, extra, cap)  # (live,)
    T = int(limit.max())
    y = torch.full((n,), BOS, dtype=torch.long, device=dev)
    done = torch.zeros(n, dtype=torch.bool, device=dev)  # (live,)
    score = torch.zeros(n, device=dev)  # (batch,)
    tokens = torch.full((n, T + 1), EOS, dtype=torch.long, device=dev)  # (batch, steps)
    live = torch.arange(n, device=dev)  # batch row of each live row
    positions = torch.arange(T + 1, device=dev, dtype=torch.float)
    for t in range(T + 1):
        logp, _ = stepper.step(y, positions[t : t + 1])
        logp[:, PAD] = float("-inf")
        _force_eos(logp, t >= limit)
        best, y = logp.max(-1)  # (live,)
        score.index_add_(0, live, best.masked_fill(done, 0.0))
        y = y.masked_fill(done, EOS)
        tokens[live, t] = y
        done = done | (y == EOS)
        if (t + 1) % every:
            continue
        ended = int(done.sum())  # the loop's one host sync
        if ended == done.numel():
            break
        if 4 * ended >= done.numel():  # drop the ended rows: they would cost as much as live ones
            keep = (~done).nonzero().squeeze(1)
            stepper.select(keep, sources=True)
            live, y, limit, done = live[keep], y[keep], limit[keep], done[keep]
    rows = [_until_eos(s) for s in tokens.tolist()]
    scores = score.tolist()
    return Hypotheses(rows, scores, [[(r, s)] for r, s in zip(rows, scores)])


def _until_eos(seq: list[int]) -> list[int]:
    return seq[: seq.index(EOS)] if EOS in seq else seq


def topk_rows(x: torch.Tensor, k: int, groups: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=1)`` of a (rows, width) tensor, about 3× faster on the CPU for wide rows: seen as ``groups``
    strided slices, the k columns with the largest maxima hold all k largest values (ties may reorder)."""
    rows, width = x.shape
    n = width // groups  # columns; the last width - groups·n values are always candidates
    if x.device.type != "cpu" or n < 4 * k:
        return x.topk(k, dim=1)
    head = x[:, : groups * n].view(rows, groups, n)
    _, col = head.amax(1).topk(k, dim=1)  # (rows, k)
    idx = (col.unsqueeze(-1) + torch.arange(0, groups * n, n, device=x.device)).view(rows, -1)  # (rows, k·groups)
    if groups * n < width:
        idx = torch.cat([idx, torch.arange(groups * n, width, device=x.device).expand(rows, -1)], 1)
    values, j = x.gather(1, idx).topk(k, dim=1)
    return values, idx.gather(1, j)


def length_penalty(length: Union[torch.Tensor, int], alpha: float) -> Union[torch.Tensor, float]:
    """GNMT length penalty ((5 + |Y|) / 6)^α (Wu et al. 2016), of a length or a tensor of them."""
    return ((5.0 + length) / 6.0) ** alpha


def coverage_penalty(coverage: torch.Tensor, beta: float) -> torch.Tensor:
    """GNMT coverage penalty β Σ_i log(min(Σ_j a_ij, 1)) over real source positions (0 at padding)."""
    return beta * torch.log(coverage.clamp(min=1e-6, max=1.0)).sum(-1)


def _ended(stop: str, is_eos: torch.Tensor, fin: torch.Tensor, alive: torch.Tensor, best_lp: torch.Tensor) -> torch.Tensor:
    """(sentences,) those the ``stop`` rule ends (see ``STOPS``): fin and alive are (sentences, K), best first."""
    if stop == "first":
        return is_eos[:, 0]  # the best candidate finished
    if stop == "full":
        return fin[:, -1] > float("-inf")  # K hypotheses finished
    return fin[:, 0] >= alive[:, 0] / best_lp  # no live hypothesis can overtake the best finished one


class Beams:
    """Beam search over a changing set of sentences: ``add`` encodes new ones, each starting at its own step 0,
    and ``step`` advances all of them by one token and hands back those that ended. ``beam_search`` adds one batch
    and steps it to the end; the server adds sentences while others decode (``nmt/serve_stream.py``).

    Finished hypotheses move to a per-sentence buffer of size ``beam``. A sentence is done at its length limit
    or by the ``stop`` rule (``STOPS``; ``exact`` is exact as log-probabilities only fall, the length penalty
    is bounded at the limit and coverage is ≤ 0); done sentences leave at steps with ``sync`` (a host sync)."""

    def __init__(self, model: Models, beam: int = 5, alpha: float = 1.0, ratio: float = 2.0, extra: int = 10,
                 cap: int = 200, n_best: int = 1, beta: float = 0.0, stop: str = "full", sync_every: int = 1):
        if stop not in STOPS:
            raise ValueError(f"stop must be one of {', '.join(STOPS)}, got {stop!r}")
        if n_best > beam:
            raise ValueError(f"n_best={n_best} cannot exceed the beam size {beam}")
        self.model, self.K, self.alpha, self.n_best, self.beta, self.stop = model, beam, alpha, n_best, beta, stop
        self.lengths = (ratio, extra, cap)
        self.masked = sync_every > 1  # done sentences ride along, masked, until the next sync
        self.stepper: Optional[Stepper] = None
        self.tags: list = []  # the caller's name of each live sentence

    def __len__(self) -> int:
        return len(self.tags)

    def add(self, batch: Batch, tags: Sequence) -> None:
        """Encode ``batch`` and let its sentences (named ``tags``) join the search at their step 0."""
        n, dev, K = batch.size, batch.src.device, self.K
        new = Stepper(self.model, batch)
        new.select(torch.arange(n, device=dev).repeat_interleave(K), sources=True)
        limit = max_lengths(batch.src_lens, *self.lengths)  # (n,)
        alive = torch.full((n, K), float("-inf"), device=dev)
        alive[:, 0] = 0.0  # only the first beam is live at the start
        width = int(limit.max()) + 1
        parts = {"t": torch.zeros(n, dtype=torch.long, device=dev), "limit": limit,
                 "best_lp": length_penalty(limit + 1, self.alpha), "alive": alive,
                 "fin_scores": torch.full((n, K), float("-inf"), device=dev),  # length-normalized, best first
                 "seqs": torch.full((n, K, width), EOS, dtype=torch.long, device=dev),
                 "fin_seqs": torch.full((n, K, width), EOS, dtype=torch.long, device=dev),
                 "y": torch.full((n * K,), BOS, dtype=torch.long, device=dev),
                 "stopped": torch.zeros(n, dtype=torch.bool, device=dev)}  # done, not yet dropped
        if self.beta:
            parts["coverage"] = torch.zeros(n * K, batch.src.size(1), device=dev)
            parts["src_mask"] = batch.src.ne(PAD).repeat_interleave(K, 0)
        first = self.stepper is None
        if first:
            self.stepper = new
        else:
            self.stepper.join(new)
            width = max(width, self.seqs.size(2))
        self.tags += list(tags)
        S = self.stepper.parts[0][0].mask.size(1)
        for name, x in parts.items():
            if not first:  # widen both sides to the longest limit and source, then append
                old = getattr(self, name)
                if name in ("seqs", "fin_seqs"):
                    old, x = (pad_to(s.transpose(1, 2), width, EOS).transpose(1, 2) for s in (old, x))
                elif name in ("coverage", "src_mask"):
                    old, x = pad_to(old, S), pad_to(x, S)
                x = torch.cat([old, x])
            setattr(self, name, x)

    def step(self, sync: bool = True) -> list[tuple[object, list[tuple[list[int], float]]]]:
        """Advance every live sentence by one token; with ``sync``, the done ones leave: [(tag, n-best)]."""
        na, K, t = len(self.tags), self.K, self.t
        logp, a = self.stepper.step(self.y, t.repeat_interleave(K).float().unsqueeze(1))  # (na*K, V)
        V = logp.size(1)
        logp[:, PAD] = float("-inf")
        _force_eos(logp, (t >= self.limit).repeat_interleave(K))
        cand = logp.view(na, K, V).add_(self.alive.unsqueeze(-1)).view(na, K * V)  # in place: logp is ours
        top, idx = topk_rows(cand, 2 * K)  # (na, 2K)
        origin, token = idx // V, idx % V
        is_eos = token == EOS
        if self.beta:
            self.coverage = self.coverage + a.float()
        # finished: new EOS candidates join the buffer, the best K stay (skipped, at the cost of
        # a host sync, in the many steps where no candidate ends; always done between syncs)
        if self.masked or bool(is_eos.any()):
            lp = length_penalty((t + 1).double(), self.alpha).float()  # (na,) as a Python float would be
            new_fin = top / lp.unsqueeze(1)
            if self.beta:
                cov = coverage_penalty(self.coverage.masked_fill(~self.src_mask, 1.0), self.beta).view(na, K)  # (na, K)
                new_fin = new_fin + cov.gather(1, origin)
            new_fin = new_fin.masked_fill(~is_eos | self.stopped.unsqueeze(1), float("-inf"))
            W = self.seqs.size(2)
            prev = self.seqs.gather(1, origin.unsqueeze(-1).expand(-1, -1, W))  # (na, 2K, W); EOS at t
            self.fin_scores, keep = torch.cat([self.fin_scores, new_fin], 1).topk(K, dim=1)
            self.fin_seqs = torch.cat([self.fin_seqs, prev], 1).gather(1, keep.unsqueeze(-1).expand(-1, -1, W))
        # alive: the best K candidates that did not end
        self.alive, pick = top.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (na, K)
        origin, token = origin.gather(1, pick), token.gather(1, pick)
        self.seqs = self.seqs.gather(1, origin.unsqueeze(-1).expand(-1, -1, self.seqs.size(2)))
        self.seqs.scatter_(2, t.view(na, 1, 1).expand(-1, K, 1), token.unsqueeze(-1))  # column t of each sentence
        done = _ended(self.stop, is_eos, self.fin_scores, self.alive, self.best_lp) | (t >= self.limit)  # (na,)
        self.stopped = done = self.stopped | done
        self.t, self.y = t + 1, token.view(-1)
        rows = (origin + torch.arange(na, device=t.device).unsqueeze(1) * K).view(-1)  # (na*K,) parents
        if not (sync and bool(done.any())):
            self._keep(rows, None)
            return []
        ended = done.nonzero().squeeze(1).tolist()
        out = [(self.tags[i], self.nbest(i)) for i in ended]
        keep_s = (~done).nonzero().squeeze(1)  # sentences that go on
        self._keep(rows.view(na, K)[keep_s].view(-1), keep_s)
        return out

    def clear(self) -> None:
        """Forget every live sentence."""
        self.stepper, self.tags = None, []

    def nbest(self, i: int) -> list[tuple[list[int], float]]:
        """Live sentence ``i``'s n-best list so far: (tokens without EOS, score), best first."""
        seqs, scores = self.fin_seqs[i, : self.n_best].tolist(), self.fin_scores[i, : self.n_best].tolist()
        return [(_until_eos(seq), s) for k, (seq, s) in enumerate(zip(seqs, scores)) if k == 0 or s > -1e30]

    def _keep(self, rows: torch.Tensor, sentences: Optional[torch.Tensor]) -> None:
        """Keep decoder rows ``rows``, their parents; with ``sentences``, only those sentences stay."""
        if sentences is not None:
            if sentences.numel() == 0:
                self.clear()
                return
            self.tags = [self.tags[i] for i in sentences.tolist()]
            for name in ("t", "limit", "best_lp", "alive", "fin_scores", "seqs", "fin_seqs", "stopped"):
                setattr(self, name, getattr(self, name)[sentences])
            self.y = self.y.view(-1, self.K)[sentences].view(-1)
            if self.beta:
                self.src_mask = self.src_mask[rows]
        self.stepper.select(rows, sources=sentences is not None)
        if self.beta:
            self.coverage = self.coverage[rows]


@torch.no_grad()
def beam_search(model: Models, batch: Batch, beam: int = 5, alpha: float = 1.0, ratio: float = 2.0, extra: int = 10,
                cap: int = 200, n_best: int = 1, beta: float = 0.0, stop: str = "full", sync_every: int = 0) -> Hypotheses:
    """Batched beam search (``Beams`` over one batch); done sentences leave at host syncs, every ``sync_every``
    steps (0: ``sync_interval``); beam 1 without n-best or coverage is ``greedy``."""
    if beam == 1 and n_best == 1 and beta == 0.0 and stop in STOPS:
        return greedy(model, batch, ratio, extra, cap, sync_every)
    every = sync_every or sync_interval(batch.src.device)
    beams = Beams(model, beam, alpha, ratio, extra, cap, n_best, beta, stop, every)
    beams.add(batch, range(batch.size))
    nbest: dict = {}
    step = 0
    while len(beams):
        step += 1
        nbest.update(beams.step(sync=step % every == 0 or step >= beams.seqs.size(2)))
    rows = [nbest[i] for i in range(batch.size)]
    return Hypotheses([h[0][0] for h in rows], [h[0][1] for h in rows], rows)
