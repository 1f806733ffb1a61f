"""Greedy and beam search over a batch, all sentences (× beams) in one tensor."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.batching import Batch
from nmt.decoder import select_state
from nmt.model import Seq2Seq
from nmt.tokenizer import BOS, EOS, PAD


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # best hypothesis per sentence, without EOS, in batch order
    scores: list[float]  # its log-probability (length-normalized for beam search)


def max_lengths(src_lens: torch.Tensor, ratio: float, extra: int, cap: int) -> torch.Tensor:
    """(batch,) output length limits: ratio · source length + extra, at most ``cap``."""
    return (src_lens.float() * ratio + extra).long().clamp(max=cap)


@torch.no_grad()
def greedy(model: Seq2Seq, batch: Batch, ratio: float = 2.0, extra: int = 10, cap: int = 200) -> Hypotheses:
    source, state = model.encode(batch.src, batch.src_lens, batch.host_lens)
    n, dev = batch.size, batch.src.device
    limit = max_lengths(batch.src_lens, ratio, extra, cap)  # (batch,)
    y = torch.full((n,), BOS, dtype=torch.long, device=dev)
    feed = source.memory.new_zeros(n, 1, model.decoder.hidden)
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    score = torch.zeros(n, device=dev)
    out = []
    T = int(limit.max())
    positions = torch.arange(T + 1, device=dev, dtype=torch.float)
    for t in range(T + 1):
        logp, feed, state, _, _ = model.decoder.step(y, feed, state, source, positions[t : t + 1])
        logp[:, PAD] = float("-inf")
        force_eos = t >= limit  # (batch,) out of length: end here
        logp[force_eos] = torch.where(
            torch.arange(logp.size(1), device=dev) == EOS, 0.0, float("-inf")
        ).to(logp.dtype)
        best, y = logp.max(-1)  # (batch,)
        score = score + best.masked_fill(done, 0.0)
        y = y.masked_fill(done, EOS)
        out.append(y)
        done = done | (y == EOS)
        if bool(done.all()):
            break
    seqs = torch.stack(out, 1).tolist()  # (batch, steps)
    return Hypotheses([_until_eos(s) for s in seqs], score.tolist())


def _until_eos(seq: list[int]) -> list[int]:
    return seq[: seq.index(EOS)] if EOS in seq else seq


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT length penalty ((5 + |Y|) / 6)^α (Wu et al. 2016)."""
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2Seq, batch: Batch, beam: int = 5, alpha: float = 1.0, ratio: float = 2.0, extra: int = 10,
    cap: int = 200,
) -> Hypotheses:
    """Batched beam search; finished hypotheses move to a per-sentence buffer of size ``beam``.

    A sentence is done when its best finished score cannot be beaten by any live beam
    (log-probabilities only fall, and the length penalty is bounded by the length limit).
    """
    if beam == 1:
        return greedy(model, batch, ratio, extra, cap)
    n, dev, K = batch.size, batch.src.device, beam
    source, state = model.encode(batch.src, batch.src_lens, batch.host_lens)
    rows = torch.arange(n, device=dev).repeat_interleave(K)  # (n*K,)
    source, state = source.select(rows), select_state(state, rows)
    limit = max_lengths(batch.src_lens, ratio, extra, cap)  # (n,)
    best_possible_lp = length_penalty(limit + 1, alpha)  # (n,)
    feed = source.memory.new_zeros(n * K, 1, model.decoder.hidden)
    y = torch.full((n * K,), BOS, dtype=torch.long, device=dev)
    alive = torch.full((n, K), float("-inf"), device=dev)
    alive[:, 0] = 0.0  # only the first beam is live at the start
    seqs = torch.empty(n, K, 0, dtype=torch.long, device=dev)
    fin_scores = torch.full((n, K), float("-inf"), device=dev)  # length-normalized
    fin_seqs = torch.empty(n, K, 0, dtype=torch.long, device=dev)
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    T = int(limit.max())
    positions = torch.arange(T + 1, device=dev, dtype=torch.float)
    offsets = (torch.arange(n, device=dev) * K).unsqueeze(1)  # (n, 1)
    for t in range(T + 1):
        logp, feed, state, _, _ = model.decoder.step(y, feed, state, source, positions[t : t + 1])
        V = logp.size(1)
        logp[:, PAD] = float("-inf")
        over = (t >= limit).repeat_interleave(K)  # (n*K,) must end now
        logp[over] = torch.where(torch.arange(V, device=dev) == EOS, 0.0, float("-inf"))
        cand = (alive.unsqueeze(-1) + logp.view(n, K, V)).view(n, K * V)  # (n, K*V)
        top, idx = cand.topk(2 * K, dim=1)  # (n, 2K)
        origin, token = idx // V, idx % V
        is_eos = token == EOS
        # finished: merge new EOS candidates into the buffer, keep the best K
        lp = length_penalty(torch.full_like(top, t + 1), alpha)
        new_fin = (top / lp).masked_fill(~is_eos | done.unsqueeze(1), float("-inf"))  # (n, 2K)
        prev = torch.cat([seqs.gather(1, origin.unsqueeze(-1).expand(-1, -1, t)),
                          torch.full((n, 2 * K, 1), EOS, dtype=torch.long, device=dev)], -1)  # (n, 2K, t+1)
        fin_seqs = torch.cat([fin_seqs, torch.full((n, K, 1), EOS, dtype=torch.long, device=dev)], -1)
        all_scores = torch.cat([fin_scores, new_fin], 1)  # (n, 3K)
        fin_scores, keep = all_scores.topk(K, dim=1)
        fin_seqs = torch.cat([fin_seqs, prev], 1).gather(1, keep.unsqueeze(-1).expand(-1, -1, t + 1))
        # alive: the best K candidates that did not end
        live_top = top.masked_fill(is_eos, float("-inf"))
        alive, pick = live_top.topk(K, dim=1)  # (n, K)
        origin = origin.gather(1, pick)
        token = token.gather(1, pick)
        seqs = torch.cat([seqs.gather(1, origin.unsqueeze(-1).expand(-1, -1, t)), token.unsqueeze(-1)], -1)
        # a sentence is done once no live beam can beat its best finished hypothesis
        done = done | (fin_scores[:, 0] >= alive[:, 0] / best_possible_lp) | (t >= limit)
        if bool(done.all()):
            break
        flat = (origin + offsets).view(-1)  # (n*K,) rows to continue from
        state = select_state(state, flat)
        feed = feed.index_select(0, flat)
        y = token.view(-1)
    best = fin_seqs[:, 0].tolist()
    return Hypotheses([_until_eos(s) for s in best], fin_scores[:, 0].tolist())
