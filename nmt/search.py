"""Greedy and beam search over a batch, all sentences (× beams) in one tensor, for one model or an
ensemble (a list of models, decoding with the average of their log-probabilities)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from nmt.batching import Batch
from nmt.stepper import Models, Stepper
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


CHUNK = 1 << 22  # elements of a (rows, vocab) block of the output layer on the CPU: 16 MB fp32, under glibc's mmap threshold


def chunk_rows(device: torch.device, vocab: int) -> int:
    """Rows whose output layer (W_s, the log-softmax, the choice of tokens) a search step computes at a time. On the
    CPU a (rows, vocab) block of ``CHUNK`` elements at most, which stays in cache: (5,000, 4,000) logits are 80 MB,
    each pass over them (the bias, the matmul, the log-softmax, the beam scores, the top-k) would go to memory, in
    blocks glibc maps afresh at every step; a GPU takes every row at once."""
    return max(1, CHUNK // vocab) if device.type == "cpu" else 1 << 62


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # best hypothesis per sentence, without EOS, in batch order
    scores: list[float]  # its log-probability (length-normalized for beam search)
    nbest: list[list[tuple[list[int], float]]]  # per sentence, best first


# the output length limit: RATIO · source length + EXTRA, at most CAP pieces (the ONNX export writes these to meta.json)
RATIO, EXTRA, CAP = 2.0, 10, 200


def max_lengths(src_lens: torch.Tensor, ratio: float, extra: int, cap: int) -> torch.Tensor:
    """(batch,) output length limits: ratio · source length + extra, at most ``cap``."""
    return (src_lens.float() * ratio + extra).long().clamp(max=cap)


def _force_eos(logp: torch.Tensor, rows: torch.Tensor) -> None:
    """In place: rows (a bool mask) that reached their length limit can only end."""
    if logp.device.type != "cpu":  # a boolean index would sync with the host
        logp.masked_fill_(rows.unsqueeze(1), float("-inf"))
        logp[:, EOS].masked_fill_(rows, 0.0)
        return
    at_limit = rows.nonzero().squeeze(1)  # a boolean index would scan all of logp (rows, vocab) at every step
    if at_limit.numel():
        logp.index_fill_(0, at_limit, float("-inf"))
        logp[at_limit, EOS] = 0.0


@torch.no_grad()
def greedy(model: Models, batch: Batch, ratio: float = RATIO, extra: int = EXTRA, cap: int = CAP, sync_every: int = 0,
           bf16_output: bool = False) -> Hypotheses:
    """Batched greedy search; ended rows leave when a quarter of the batch, checked every ``sync_every`` steps;
    ``bf16_output``: the vocabulary projection from a bf16 copy of W_s."""
    stepper = Stepper(model, batch, bf16_output)
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
    chunk = chunk_rows(dev, stepper.models[0].decoder.out.out_features)
    for t in range(T + 1):
        stepper.advance(y, positions[t : t + 1])
        best, y = _greedy_choice(stepper, t >= limit, chunk)  # (live,)
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
            stepper.select(keep, keep)
            live, y, limit, done = live[keep], y[keep], limit[keep], done[keep]
    rows = [_until_eos(s) for s in tokens.tolist()]
    scores = score.tolist()
    return Hypotheses(rows, scores, [[(r, s)] for r, s in zip(rows, scores)])


def _greedy_choice(stepper: Stepper, at_limit: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's best next token and its log-probability (rows,), ``rows`` rows of the output layer at a time."""
    best, token = [], []
    for s in range(0, at_limit.numel(), rows):
        logp = stepper.log_probs(s, s + rows)  # (rows, vocab)
        logp[:, PAD] = float("-inf")
        _force_eos(logp, at_limit[s : s + rows])
        b, y = logp.max(-1)
        best.append(b)
        token.append(y)
    return (best[0], token[0]) if len(best) == 1 else (torch.cat(best), torch.cat(token))


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


@torch.no_grad()
def beam_search(model: Models, batch: Batch, beam: int = 5, alpha: float = 1.0, ratio: float = RATIO, extra: int = EXTRA,
                cap: int = CAP, n_best: int = 1, beta: float = 0.0, stop: str = "full", sync_every: int = 0,
                bf16_output: bool = False) -> Hypotheses:
    """Batched beam search; finished hypotheses move to a per-sentence buffer of size ``beam``.

    A sentence is done at its length limit or by the ``stop`` rule (``STOPS``; ``exact`` is exact as
    log-probabilities only fall, the length penalty is bounded at the limit and coverage is ≤ 0); done
    sentences ride along masked and leave at host syncs, every ``sync_every`` steps (0: ``sync_interval``),
    once an eighth of them are done. Steps keep back-pointers; the hypotheses are read back at the end."""
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {', '.join(STOPS)}, got {stop!r}")
    if beam == 1 and n_best == 1 and beta == 0.0:
        return greedy(model, batch, ratio, extra, cap, sync_every, bf16_output)
    if n_best > beam:
        raise ValueError(f"n_best={n_best} cannot exceed the beam size {beam}")
    n, dev, K = batch.size, batch.src.device, beam
    every = sync_every or sync_interval(dev)
    stepper = Stepper(model, batch, bf16_output)
    # the first step has one live hypothesis per sentence: it runs on the sentences (kr = 1 row each), the
    # beam's K rows from the second step on (kr = K); a vocabulary under 2K wide takes K rows from the start
    kr = 1 if stepper.models[0].decoder.out.out_features >= 2 * K else K
    if kr > 1:
        stepper.select(torch.arange(n, device=dev).repeat_interleave(K))
    limit_all = max_lengths(batch.src_lens, ratio, extra, cap)  # (n,)
    T = int(limit_all.max())
    positions = torch.arange(T + 1, device=dev, dtype=torch.float)
    fin_scores = torch.full((n, K), float("-inf"), device=dev)  # length-normalized, best first
    fin_len = torch.zeros(n, K, dtype=torch.long, device=dev)  # tokens before the EOS
    fin_last = torch.zeros(n, K, dtype=torch.long, device=dev)  # the beam the EOS extends
    tokens = torch.full((T + 1, n, K), EOS, dtype=torch.long, device=dev)  # (step, n, K) back-pointers:
    parents = torch.zeros(T + 1, n, K, dtype=torch.long, device=dev)  # each beam's token and the beam it extends
    # live part: `act` are the sentences still decoding; rows are act × K
    act = torch.arange(n, device=dev)
    limit, best_lp = limit_all, length_penalty(limit_all + 1, alpha)
    alive = torch.full((n, K), float("-inf"), device=dev)
    alive[:, 0] = 0.0  # only the first beam is live at the start
    stopped = torch.zeros(n, dtype=torch.bool, device=dev)  # (act,) done, not yet dropped
    coverage = torch.zeros(n * kr, batch.src.size(1), device=dev) if beta else None
    src_mask = batch.src.ne(PAD).repeat_interleave(kr, 0) if beta else None
    y = torch.full((n * kr,), BOS, dtype=torch.long, device=dev)
    chunk = chunk_rows(dev, stepper.models[0].decoder.out.out_features)
    for t in range(T + 1):
        na = act.numel()
        a = stepper.advance(y, positions[t : t + 1])  # (na*kr, src_len)
        top, origin, token = _candidates(stepper, alive, t >= limit, kr, 2 * K, chunk)  # (na, 2K)
        is_eos = token == EOS
        if coverage is not None:
            coverage = coverage + a.float()
        # finished: new EOS candidates join the buffer, the best K stay
        new_fin = top / length_penalty(t + 1, alpha)
        if coverage is not None:
            cov = coverage_penalty(coverage.masked_fill(~src_mask, 1.0), beta).view(na, kr)  # (na, kr)
            new_fin = new_fin + cov.gather(1, origin)
        new_fin = new_fin.masked_fill(~is_eos | stopped.unsqueeze(1), float("-inf"))
        merged, keep = torch.cat([fin_scores[act], new_fin], 1).topk(K, dim=1)  # (na, K) of (na, 3K)
        fin_scores[act] = merged
        fin_len[act] = torch.cat([fin_len[act], torch.full_like(origin, t)], 1).gather(1, keep)
        fin_last[act] = torch.cat([fin_last[act], origin], 1).gather(1, keep)
        # alive: the best K candidates that did not end
        alive, pick = top.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (na, K)
        origin, token = origin.gather(1, pick), token.gather(1, pick)
        tokens[t, act], parents[t, act] = token, origin
        stopped = stopped | _ended(stop, is_eos, fin_scores[act], alive, best_lp) | (t >= limit)  # (na,)
        rows = (origin + torch.arange(na, device=dev).unsqueeze(1) * kr).view(-1)  # (na*K,) parents
        drop = False
        if (t + 1) % every == 0:
            ended = int(stopped.sum())  # the loop's host sync
            if ended == na:
                break
            drop = 8 * ended >= na  # done sentences leave once an eighth: each costs a row of every step
        if drop:
            keep_s = (~stopped).nonzero().squeeze(1)  # sentences that go on
            act, limit, best_lp = act[keep_s], limit[keep_s], best_lp[keep_s]
            alive, token, stopped = alive[keep_s], token[keep_s], stopped[keep_s]
            rows = rows.view(na, K)[keep_s].view(-1)
        if src_mask is not None and (drop or kr < K):
            src_mask = src_mask[rows]
        stepper.select(rows, keep_s if drop else None)
        if coverage is not None:
            coverage = coverage[rows]
        y, kr = token.view(-1), K
    seqs = _backtrack(tokens, parents, fin_len[:, :n_best], fin_last[:, :n_best])  # (n, n_best, T+1)
    nbest = [[(_until_eos(seq), s) for k, (seq, s) in enumerate(zip(row_seqs, row_scores)) if k == 0 or s > -1e30]
             for row_seqs, row_scores in zip(seqs.tolist(), fin_scores[:, :n_best].tolist())]
    return Hypotheses([h[0][0] for h in nbest], [h[0][1] for h in nbest], nbest)


def _candidates(stepper: Stepper, alive: torch.Tensor, at_limit: torch.Tensor, kr: int, k: int,
                rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_expand`` for every live sentence (alive: (na, K); at_limit: (na,) bool), the output layer over whole
    sentences of about ``rows`` rows at a time."""
    per = max(1, rows // kr)  # sentences a chunk
    parts = []
    for s in range(0, alive.size(0), per):
        logp = stepper.log_probs(s * kr, (s + per) * kr)  # (sentences × kr, V)
        logp[:, PAD] = float("-inf")
        _force_eos(logp, at_limit[s : s + per].repeat_interleave(kr))
        parts.append(_expand(logp, alive[s : s + per], kr, k))
    if len(parts) == 1:
        return parts[0]
    top, origin, token = zip(*parts)
    return torch.cat(top), torch.cat(origin), torch.cat(token)


def _expand(logp: torch.Tensor, alive: torch.Tensor, kr: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best ``k`` continuations of each sentence from logp (na*kr, V), in place (logp is the caller's): scores
    alive + log p (na, k), the beam each extends and its token. (Each row's own best k first, then the beam scores,
    wrote no (rows, vocab) sum but cost more: five times the rows in the grouped top-k.)"""
    na, V = alive.size(0), logp.size(1)
    cand = logp.view(na, kr, V).add_(alive[:, :kr].unsqueeze(-1)).view(na, kr * V)
    top, idx = topk_rows(cand, k)  # (na, k)
    return top, idx // V, idx % V


def _backtrack(tokens: torch.Tensor, parents: torch.Tensor, length: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """(n, m, T+1) hypotheses, EOS after their ``length`` tokens, from the steps' back-pointers: ``tokens`` and
    ``parents`` (T+1, n, K) hold each step's token and the beam it extends; ``last`` (n, m) is the beam each
    hypothesis's EOS extends."""
    steps, n, _ = tokens.shape
    out = torch.full((n, last.size(1), steps), EOS, dtype=torch.long, device=tokens.device)
    beam = last.clone()  # (n, m) the beam at step j of each hypothesis
    for j in range(int(length.max()) - 1, -1, -1):
        inside = j < length
        out[:, :, j] = torch.where(inside, tokens[j].gather(1, beam), EOS)
        beam = torch.where(inside, parents[j].gather(1, beam), beam)
    return out
