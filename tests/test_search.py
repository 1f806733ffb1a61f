"""Greedy and beam search: length limits, batch independence, scores, and a hand-computed beam."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from nmt.batching import make_batch
from nmt.engine.cell import project_inputs
from nmt.search import STOPS, _force_eos, beam_search, greedy, length_penalty, topk_rows
from nmt.tokenizer import BOS, EOS, PAD, UNK

SRC_V, TGT_V = 30, 25


@pytest.fixture
def sources(random_sources):
    return random_sources(6, 1, 12, SRC_V, seed=21)


def batch_of(srcs):
    return make_batch(srcs, None, range(len(srcs)))


def limit(n: int) -> int:
    return 2 * n + 10


@torch.no_grad()
def reference_greedy(model, src: list[int]) -> tuple[list[int], float]:
    """One sentence, one token at a time, straight from ``decoder.step``."""
    b = batch_of([src])
    source, state = model.encode(b.src, b.src_lens, b.host_lens)
    feed = source.memory.new_zeros(1, 1, model.decoder.hidden)
    y, out, total = torch.tensor([BOS]), [], 0.0
    for t in range(limit(len(src)) + 1):
        logp, feed, state, _, _ = model.decoder.step(y, feed, state, source, torch.tensor([float(t)]))
        logp[0, PAD] = -math.inf
        if t == limit(len(src)):
            return out, total
        y = logp.argmax(-1)
        total += float(logp[0, y])
        if int(y) == EOS:
            return out, total
        out.append(int(y))
    raise AssertionError("unreachable")


@torch.no_grad()
def reference_beam(model, src: list[int], beam: int, alpha: float) -> tuple[list[int], float]:
    """One sentence, ``stop="full"``, hypotheses as Python lists, each stepped alone through ``decoder.step``:
    the best 2·beam continuations of all hypotheses, in order, either end (EOS) or live on, beam of each at most."""
    b = batch_of([src])
    source, state = model.encode(b.src, b.src_lens, b.host_lens)
    alive = [([], 0.0, source.memory.new_zeros(1, 1, model.decoder.hidden), state)]  # tokens, log p, feed, state
    finished: list[tuple[float, list[int]]] = []
    for t in range(limit(len(src)) + 1):
        cands = []
        for toks, score, feed, st in alive:
            y = torch.tensor([toks[-1] if toks else BOS])
            logp, feed, st, _, _ = model.decoder.step(y, feed, st, source, torch.tensor([float(t)]))
            logp[0, PAD] = -math.inf
            if t == limit(len(src)):  # the length limit: only EOS, and free
                logp[0] = -math.inf
                logp[0, EOS] = 0.0
            cands += [(score + float(lp), toks, v, feed, st) for v, lp in enumerate(logp[0]) if lp > -math.inf]
        cands.sort(key=lambda c: -c[0])
        alive = []
        for score, toks, v, feed, st in cands[: 2 * beam]:
            if v == EOS:
                finished.append((score / length_penalty(t + 1, alpha), toks))
            elif len(alive) < beam:
                alive.append(([*toks, v], score, feed, st))
        finished = sorted(finished, key=lambda f: -f[0])[:beam]
        if len(finished) == beam or t == limit(len(src)):
            return finished[0][1], finished[0][0]
    raise AssertionError("unreachable")


@pytest.mark.parametrize("rnn_type,input_feeding", [("lstm", True), ("gru", True), ("lstm", False)])
def test_greedy_matches_a_one_sentence_reference(make_model, sources, rnn_type, input_feeding):
    """Batched greedy gives, per sentence, the tokens and log-probability of a naive loop; beam=1
    is greedy."""
    model = make_model(SRC_V, TGT_V, mode="local_p", window=3, rnn_type=rnn_type, input_feeding=input_feeding)
    hyps = greedy(model, batch_of(sources))
    for src, toks, score in zip(sources, hyps.tokens, hyps.scores):
        ref_toks, ref_score = reference_greedy(model, src)
        assert toks == ref_toks
        assert score == pytest.approx(ref_score, abs=1e-4)
    assert beam_search(model, batch_of(sources), beam=1).tokens == hyps.tokens


@pytest.mark.parametrize("search", ["greedy", "beam4"])
def test_outputs_stop_at_the_length_limit(make_model, sources, search):
    """A model that never ends a sentence is cut at 2·|src|+10 tokens (or at ``cap``)."""
    model = make_model(SRC_V, TGT_V, mode="global")
    with torch.no_grad():
        model.decoder.out.bias[EOS] = -1e4
    decode = (lambda b, **k: greedy(model, b, **k)) if search == "greedy" else \
        (lambda b, **k: beam_search(model, b, beam=4, **k))
    hyps = decode(batch_of(sources))
    assert [len(t) for t in hyps.tokens] == [limit(len(s)) for s in sources]
    capped = decode(batch_of(sources), cap=12)
    assert [len(t) for t in capped.tokens] == [min(limit(len(s)), 12) for s in sources]


@pytest.mark.parametrize("at_limit", [[], [2], [0, 3, 4]])
def test_rows_at_their_limit_can_only_end_and_the_others_are_untouched(at_limit):
    logp = torch.randn(5, 9).log_softmax(-1)
    rows = torch.zeros(5, dtype=torch.bool)
    rows[at_limit] = True
    want = logp.clone()
    want[rows] = float("-inf")
    want[rows, EOS] = 0.0
    _force_eos(logp, rows)
    assert torch.equal(logp, want)


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
def test_a_sentence_decodes_the_same_alone_or_in_a_batch(make_model, sources, beam, mode):
    """Results do not depend on the other sentences in the batch (padding, lengths, early ends)."""
    model = make_model(SRC_V, TGT_V, mode=mode, window=3, seed=5)
    batched = beam_search(model, batch_of(sources), beam=beam)
    for i, src in enumerate(sources):
        alone = beam_search(model, batch_of([src]), beam=beam)
        assert alone.tokens[0] == batched.tokens[i]
        assert alone.scores[0] == pytest.approx(batched.scores[i], abs=1e-4)
    # and the order of the batch does not matter either
    rev = beam_search(model, batch_of(sources[::-1]), beam=beam)
    assert rev.tokens[::-1] == batched.tokens


def test_beam_scores_are_normalized_log_probabilities(make_model, sources):
    """A beam hypothesis's score is log P(y, EOS | x) / ((5+|y|+1)/6)^α, re-scored by teacher forcing."""
    model = make_model(SRC_V, TGT_V, mode="local_m", window=3, seed=6)
    alpha = 0.6
    hyps = beam_search(model, batch_of(sources), beam=3, alpha=alpha)
    for src, toks, score in zip(sources, hyps.tokens, hyps.scores):
        assert not {PAD, BOS, EOS} & set(toks)
        b = make_batch([src], [toks], [0])
        with torch.no_grad():
            logits, _ = model(b.src, b.src_lens, b.host_lens, b.tgt_in)
        logp = torch.log_softmax(logits[0], -1)
        target = [*toks, EOS]
        steps = len(target) if len(toks) < limit(len(src)) else len(toks)  # a forced EOS is free
        total = sum(float(logp[t, target[t]]) for t in range(steps))
        lp = float(length_penalty(torch.tensor(len(toks) + 1), alpha))
        assert score == pytest.approx(total / lp, abs=1e-4)


@pytest.mark.parametrize("beam,mode", [(3, "local_p"), (4, "global"), (13, "local_m")])  # 13: 2·13 > vocab 25
def test_beam_matches_a_one_sentence_reference(make_model, random_sources, beam, mode):
    """The batched search (back-pointers, sentences leaving as they end) gives, per sentence, the hypothesis and
    score of a plain list-of-hypotheses beam search."""
    model = make_model(SRC_V, TGT_V, mode=mode, window=2, seed=11, decoder_layers=2)
    sources = random_sources(9, 1, 10, SRC_V, seed=13)
    hyps = beam_search(model, batch_of(sources), beam=beam, alpha=0.8)
    for src, toks, score in zip(sources, hyps.tokens, hyps.scores):
        ref_toks, ref_score = reference_beam(model, src, beam, 0.8)
        assert toks == ref_toks
        assert score == pytest.approx(ref_score, abs=1e-4)


# --------------------------------------------------------------------------- a hand-built bigram model
A, B_, C, D_ = 4, 5, 6, 7
BIGRAM = {  # next-token probabilities given the previous token; PAD/UNK/BOS never follow
    BOS: {A: 0.5, B_: 0.4, C: 0.05, D_: 0.04, EOS: 0.01},
    A: {C: 0.4, D_: 0.3, A: 0.12, B_: 0.1, EOS: 0.08},
    B_: {EOS: 0.9, A: 0.025, B_: 0.025, C: 0.025, D_: 0.025},
    C: {EOS: 0.6, A: 0.1, B_: 0.1, C: 0.1, D_: 0.1},
    D_: {EOS: 0.5, A: 0.2, B_: 0.1, C: 0.1, D_: 0.1},
}


@pytest.fixture
def bigram_model(make_model, monkeypatch):
    """A real encoder with the decoder's step replaced by the fixed bigram table above: ``advance`` passes the previous
    token on as h̃, ``log_probs`` looks its row up."""
    model = make_model(10, 8)
    table = torch.full((8, 8), -math.inf)
    for prev, row in BIGRAM.items():
        for tok, prob in row.items():
            table[prev, tok] = math.log(prob)

    def advance(y_prev, feed, state, src, position, weights=None, search_table=None):
        return y_prev.view(-1, 1, 1).float(), state, None, None  # (rows, 1, 1) h̃: the token

    def log_probs(feed, out=None):
        return table[feed.view(-1).long()].clone()

    monkeypatch.setattr(model.decoder, "advance", advance)
    monkeypatch.setattr(model.decoder, "log_probs", log_probs)
    return model


def best_by_enumeration(max_len: int, alpha: float) -> tuple[list[int], float]:
    """Exhaustive search over every output up to ``max_len`` tokens (EOS is forced, free, at max_len)."""
    best = ([], -math.inf)
    for n in range(max_len + 1):
        for seq in itertools.product([A, B_, C, D_], repeat=n):
            prev, total = BOS, 0.0
            for tok in seq:
                total += math.log(BIGRAM[prev].get(tok, 0.0) or 1e-300)
                prev = tok
            if n < max_len:
                total += math.log(BIGRAM[prev][EOS])
            score = total / ((5 + n + 1) / 6) ** alpha
            if score > best[1]:
                best = (list(seq), score)
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_finds_what_greedy_misses(bigram_model, alpha):
    """Greedy takes a (0.5) then c (0.4) then EOS (0.6): P = 0.12. Beam 2 keeps b (0.4), whose
    EOS (0.9) gives P = 0.36, the exhaustive optimum, for both sentences of the batch."""
    batch = batch_of([[5, 6, 7], [8]])
    g = greedy(bigram_model, batch, cap=4)
    assert g.tokens == [[A, C], [A, C]]
    assert g.scores == pytest.approx([math.log(0.12)] * 2)
    expected_tokens, expected_score = best_by_enumeration(4, alpha)
    assert expected_tokens == [B_]
    assert expected_score == pytest.approx(math.log(0.36) / (7 / 6) ** alpha)
    for beam in (2, 3):
        hyps = beam_search(bigram_model, batch, beam=beam, alpha=alpha, cap=4)
        assert hyps.tokens == [[B_], [B_]]
        assert hyps.scores == pytest.approx([expected_score] * 2)


@pytest.mark.parametrize("stop,steps", [("first", 2), ("full", 3), ("exact", 2)])
def test_stop_rules_end_the_search_when_they_say(bigram_model, monkeypatch, stop, steps):
    """Beam 2. Step 2's best candidate is b EOS (0.36): ``first`` ends there. ``full`` waits for a
    second finished hypothesis, a c EOS (0.12), at step 3. ``exact`` (α = 1) ends at step 2 too:
    the best live prefix, a c (0.2), cannot beat b EOS even if the penalty of the longest output
    (4 tokens) divides it."""
    calls = []
    inner = bigram_model.decoder.advance
    monkeypatch.setattr(bigram_model.decoder, "advance", lambda *a, **k: calls.append(1) or inner(*a, **k))
    hyps = beam_search(bigram_model, batch_of([[5, 6, 7]]), beam=2, alpha=1.0, cap=4, stop=stop)
    assert hyps.tokens == [[B_]]
    assert len(calls) == steps


@pytest.mark.parametrize("seed", [3, 4])
def test_exact_stop_never_scores_below_the_early_rules(make_model, sources, seed):
    """The decoding is the same until a rule stops a sentence and the finished buffer only
    improves, so ``exact``, which stops last, scores at least as well as ``full`` and ``first``."""
    model = make_model(SRC_V, TGT_V, mode="global", seed=seed)
    scores = {s: beam_search(model, batch_of(sources), beam=3, stop=s).scores for s in STOPS}
    for s in ("full", "first"):
        assert all(e >= o - 1e-5 for e, o in zip(scores["exact"], scores[s])), s
    with pytest.raises(ValueError, match="stop must be one of"):
        beam_search(model, batch_of(sources), beam=3, stop="never")


@pytest.mark.parametrize("rows,width,k", [(3, 4000, 10), (7, 20003, 10), (2, 50, 10), (5, 333, 4)])
def test_topk_rows_is_topk(rows, width, k):
    """The grouped top-k gives topk's values, at indices that hold them, also with -inf blocks
    (beams not yet live) and a width that the groups do not divide."""
    g = torch.Generator().manual_seed(width)
    x = torch.randn(rows, width, generator=g)
    x[0, width // 5 :] = -math.inf
    values, idx = topk_rows(x, k)
    ref, _ = x.topk(k, dim=1)
    assert torch.equal(values, ref)
    assert torch.equal(x.gather(1, idx), values)
    assert all(len(set(r)) == k for r in idx.tolist())


def test_unk_is_a_normal_token_but_pad_never_appears(make_model, sources):
    """PAD is masked out of the search; the other specials are ordinary outputs or end markers."""
    model = make_model(SRC_V, TGT_V, seed=7)
    with torch.no_grad():
        model.decoder.out.bias[PAD] = 50.0  # the model loves PAD
    for hyps in (greedy(model, batch_of(sources)), beam_search(model, batch_of(sources), beam=3)):
        assert all(PAD not in t for t in hyps.tokens)
    assert UNK == 1


# --------------------------------------------------------------------------- n-best, ensembles, coverage
def test_n_best_lists_are_sorted_and_start_with_the_best(make_model, sources):
    """n_best=K returns up to K distinct hypotheses per sentence, best first; the first is the
    1-best of the same beam."""
    model = make_model(SRC_V, TGT_V, mode="global")
    one = beam_search(model, batch_of(sources), beam=4)
    many = beam_search(model, batch_of(sources), beam=4, n_best=3)
    assert many.tokens == one.tokens
    for nbest in many.nbest:
        assert 1 <= len(nbest) <= 3
        scores = [s for _, s in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(t) for t, _ in nbest}) == len(nbest)
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, batch_of(sources), beam=2, n_best=3)


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_of_one_model_twice_is_that_model(make_model, sources, beam):
    model = make_model(SRC_V, TGT_V, mode="local_p", window=3)
    search = greedy if beam == 1 else (lambda m, b: beam_search(m, b, beam=beam))
    single, double = search(model, batch_of(sources)), search([model, model], batch_of(sources))
    assert double.tokens == single.tokens
    assert double.scores == pytest.approx(single.scores, abs=1e-5)


def test_an_ensemble_averages_log_probabilities(make_model, sources):
    """Two different models: the ensemble's greedy score is the sum over its own output of the
    mean of the members' log-probabilities, recomputed here step by step."""
    from nmt.stepper import Stepper

    m1 = make_model(SRC_V, TGT_V, mode="global", seed=1)
    m2 = make_model(SRC_V, TGT_V, mode="local_m", window=3, seed=2, rnn_type="gru")
    b = batch_of(sources[:1])
    hyp = greedy([m1, m2], b)
    s1, s2 = Stepper(m1, b), Stepper(m2, b)
    total, y = 0.0, torch.tensor([BOS])
    with torch.no_grad():
        for t, tok in enumerate(hyp.tokens[0] + [EOS]):
            if t == limit(len(sources[0])):  # out of length: EOS is forced, at no cost
                break
            s1.advance(y, torch.tensor([float(t)]))
            l1 = s1.log_probs(0, y.numel())
            s2.advance(y, torch.tensor([float(t)]))
            l2 = s2.log_probs(0, y.numel())
            mean = (l1 + l2) / 2
            mean[0, PAD] = -math.inf
            assert int(mean.argmax()) == tok
            total += float(mean[0, tok])
            y = torch.tensor([tok])
    assert hyp.scores[0] == pytest.approx(total, abs=1e-4)


def test_coverage_penalty_changes_scores_not_the_interface(make_model, sources):
    """β = 0 is plain beam search; β > 0 still decodes every sentence and lowers (or keeps) the
    scores of hypotheses that leave source words unattended."""
    model = make_model(SRC_V, TGT_V, mode="global")
    plain = beam_search(model, batch_of(sources), beam=3)
    zero = beam_search(model, batch_of(sources), beam=3, beta=0.0)
    cov = beam_search(model, batch_of(sources), beam=3, beta=0.5)
    assert zero.tokens == plain.tokens
    assert len(cov.tokens) == len(sources)
    assert all(c <= p + 1e-4 for c, p in zip(cov.scores, plain.scores))


def test_coverage_penalty_is_the_gnmt_formula(make_model, sources):
    """A hypothesis's score with β > 0 is log P(Y|X) / lp(Y) + β Σ_i log min(Σ_j a_ij, 1), with the
    attention a_ij of the model reading its own output (EOS step included) over the real source."""
    model, alpha, beta = make_model(SRC_V, TGT_V, mode="global"), 0.8, 0.7
    hyps = beam_search(model, batch_of(sources), beam=3, alpha=alpha, beta=beta)
    for src, tokens, score in zip(sources, hyps.tokens, hyps.scores):
        if len(tokens) + 1 > limit(len(src)):  # EOS forced at the limit: not this formula's case
            continue
        b = make_batch([src], [tokens], [0])
        with torch.no_grad():
            logits, _ = model(b.src, b.src_lens, tuple(b.host_lens.tolist()), b.tgt_in)  # (1, T+1, V)
            weights, _ = model.align(b.src, b.src_lens, b.host_lens, b.tgt_in)  # (1, T+1, S)
        logp = torch.log_softmax(logits.float(), -1)[0].gather(1, b.tgt_out[0].unsqueeze(1)).sum()
        coverage = weights[0].float().sum(0)  # (S,) Σ_j a_ij, every source position is real here
        expected = float(logp) / length_penalty(len(tokens) + 1, alpha)
        expected += beta * float(torch.log(coverage.clamp(max=1.0)).sum())
        assert score == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("every", [3, 8])
@pytest.mark.parametrize("stop", STOPS)
def test_syncing_with_the_host_every_few_steps_changes_nothing(make_model, random_sources, stop, every):
    """On a GPU the search loops look at the ended rows every few steps (a sync drains the kernel
    queue); ended rows ride along masked until then. The hypotheses and scores are those of a
    sync at every step (the CPU's way), for greedy, every stop rule, coverage and n-best lists."""
    model = make_model(SRC_V, TGT_V, mode="local_p", window=2, seed=7, decoder_layers=2)
    batch = batch_of(random_sources(9, 1, 14, SRC_V, seed=5))
    for kw in ({"beam": 1}, {"beam": 4, "stop": stop}, {"beam": 3, "stop": stop, "beta": 0.3, "n_best": 2}):
        ref, got = beam_search(model, batch, **kw), beam_search(model, batch, **kw, sync_every=every)
        assert got.tokens == ref.tokens, kw
        assert got.scores == pytest.approx(ref.scores, abs=1e-5), kw
        assert [[h for h, _ in n] for n in got.nbest] == [[h for h, _ in n] for n in ref.nbest], kw


@pytest.mark.parametrize("beam", [1, 4])
def test_search_syncs_with_the_host_once_per_interval(make_model, random_sources, monkeypatch, beam):
    """Host syncs (a tensor read as a bool or an int) come at most every ``sync_every`` steps."""
    model = make_model(SRC_V, TGT_V, seed=2)
    batch = batch_of(random_sources(7, 8, 14, SRC_V, seed=6))
    steps, reads = [], []
    inner = model.decoder.advance
    monkeypatch.setattr(model.decoder, "advance", lambda *a, **k: steps.append(1) or inner(*a, **k))
    for name in ("__bool__", "__int__", "item"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, _real=real: reads.append(1) or _real(self))
    beam_search(model, batch, beam=beam, sync_every=8)
    assert len(steps) >= 24
    assert len(reads) <= 3 * (len(steps) // 8 + 1) + 1  # ≤ 3 reads a sync (any, all, nonzero), plus T


def test_the_search_cache_follows_the_weights(make_model, sources):
    """The cached step weights and embedding table (input feeding, eval) are rebuilt after fused Adam steps
    (which leave the version counters alone) and after a load; with them the search is what it is without."""
    model = make_model(SRC_V, TGT_V, input_feeding=True, decoder_layers=2)
    batch = batch_of(sources)

    def fresh():
        model.decoder.search_cache.clear()
        return beam_search(model, batch, beam=3)

    first = beam_search(model, batch, beam=3)
    assert first == fresh()
    w, table, out = model.decoder.search_cache.get(model.decoder)
    row = project_inputs(model.decoder.rnn, model.decoder.embed.weight[5], w)
    assert out is None and torch.allclose(table[5], row, atol=1e-6)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    logits, _ = model(batch.src, batch.src_lens, batch.host_lens, batch.src[:, :4].clamp(max=TGT_V - 1))
    logits.logsumexp(-1).mean().backward()
    opt.step()
    model.eval()
    after_step = beam_search(model, batch, beam=3)
    assert after_step == fresh() and after_step != first
    model.load_state_dict(make_model(SRC_V, TGT_V, input_feeding=True, decoder_layers=2, seed=1).state_dict())
    after_load = beam_search(model, batch, beam=3)
    assert after_load == fresh() and after_load != after_step


@pytest.mark.parametrize("rows", [1, 8])
def test_the_output_layer_in_chunks_changes_nothing(make_model, random_sources, monkeypatch, rows):
    """On the CPU a step's output layer (W_s, the log-softmax, the choice of tokens) runs over a few thousand rows
    at a time (``chunk_rows``), so its (rows, vocab) blocks stay in cache. Blocks of any size, whole sentences of
    beam rows each (a block smaller than a beam still takes one sentence), give what one block gives: greedy, beam
    search, coverage and n-best lists, bf16 W_s, and an ensemble."""
    import nmt.search

    models = [make_model(SRC_V, TGT_V, mode="local_p", window=2, seed=s) for s in (7, 8)]
    batch = batch_of(random_sources(7, 1, 12, SRC_V, seed=5))
    settings = [{"beam": 1}, {"beam": 4, "stop": "full"}, {"beam": 3, "beta": 0.3, "n_best": 2},
                {"beam": 3, "bf16_output": True}]
    for model, kw in [(models[0], kw) for kw in settings] + [(models, {"beam": 3}), (models, {"beam": 1})]:
        monkeypatch.setattr(nmt.search, "chunk_rows", lambda device, vocab: 1 << 62)
        ref = beam_search(model, batch, **kw)
        monkeypatch.setattr(nmt.search, "chunk_rows", lambda device, vocab: rows)
        got = beam_search(model, batch, **kw)
        assert got.nbest == ref.nbest, kw


def test_the_cpu_takes_the_output_layer_in_blocks_a_gpu_at_once():
    """A CPU block holds at most ``CHUNK`` logits (at least one row); a GPU takes every row."""
    from nmt.search import CHUNK, chunk_rows

    cpu = torch.device("cpu")
    assert chunk_rows(cpu, 4000) * 4000 <= CHUNK < (chunk_rows(cpu, 4000) + 1) * 4000
    assert chunk_rows(cpu, 32000) < chunk_rows(cpu, 4000) and chunk_rows(cpu, 10 * CHUNK) == 1
    assert chunk_rows(torch.device("cuda"), 4000) >= 1 << 30
