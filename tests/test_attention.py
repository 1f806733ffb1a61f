"""Luong attention: all 3 scores × 3 modes on a padded batch of mixed source lengths."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from nmt.attention import LuongAttention
from nmt.engine.attention import FastAttention
from nmt.engine.deferred import tap

SCORES, MODES = ("dot", "general", "concat"), ("global", "local_m", "local_p")
B, S, T, H, D = 3, 7, 9, 8, 2
LENS = torch.tensor([7, 3, 5])


def inputs(seed: int = 0):
    """query (B,T,H), memory (B,S,H) zero at padding, mask, float lengths, positions 0..T-1."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.arange(S).unsqueeze(0) < LENS.unsqueeze(1)
    memory = torch.randn(B, S, H, generator=g) * mask.unsqueeze(-1)
    query = torch.randn(B, T, H, generator=g)
    return query, memory, mask, LENS.float(), torch.arange(T, dtype=torch.float)


def attend(att: LuongAttention, query, memory, mask, lens, positions):
    return att(query, att.keys(memory), memory, mask, lens, positions)


@pytest.mark.parametrize("score,mode", list(itertools.product(SCORES, MODES)))
def test_weights_respect_padding_window_and_mass(score, mode):
    """Zero weight on padding; zero outside [p-D, p+D] for local modes; rows sum to 1 (global,
    local_m) or at most 1 (local_p, Gaussian-damped); p is min(t, S-1) for local_m and in (0, S]
    for local_p; the context is the weighted sum of the memory."""
    torch.manual_seed(1)
    att = LuongAttention(score, mode, H, window=D)
    q, mem, mask, lens, pos = inputs()
    context, w, p = attend(att, q, mem, mask, lens, pos)
    assert context.shape == (B, T, H) and w.shape == (B, T, S)
    assert torch.isfinite(w).all() and torch.isfinite(context).all()
    pad = ~mask.unsqueeze(1).expand(B, T, S)
    assert (w[pad] == 0).all()
    assert (w >= 0).all()
    torch.testing.assert_close(context, torch.bmm(w, mem))
    sums = w.sum(-1)
    if mode == "global":
        assert p is None
        torch.testing.assert_close(sums, torch.ones(B, T))
        assert (w[~pad] > 0).all()
        return
    assert p.shape == (B, T)
    dist = (torch.arange(S).view(1, 1, S) - p.unsqueeze(-1)).abs()
    assert (w[dist > D] == 0).all()
    if mode == "local_m":
        expected = torch.minimum(pos.unsqueeze(0), (lens - 1).unsqueeze(1))
        assert torch.equal(p, expected)
        torch.testing.assert_close(sums, torch.ones(B, T))
    else:
        assert (p > 0).all() and (p <= lens.unsqueeze(1)).all()
        assert (sums <= 1 + 1e-6).all() and (sums > 0).all()


@pytest.mark.parametrize("score", SCORES)
def test_local_m_with_a_wide_window_equals_global(score):
    """A window wider than every sentence makes local-m exactly global attention."""
    torch.manual_seed(2)
    local = LuongAttention(score, "local_m", H, window=S + 1)
    glob = LuongAttention(score, "global", H)
    glob.load_state_dict(local.state_dict())
    c1, w1, _ = attend(local, *inputs())
    c2, w2, _ = attend(glob, *inputs())
    torch.testing.assert_close(w1, w2, rtol=0, atol=0)
    torch.testing.assert_close(c1, c2, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_general_with_identity_equals_dot(mode):
    general = LuongAttention("general", mode, H, window=D)
    dot = LuongAttention("dot", mode, H, window=D)
    with torch.no_grad():
        general.W_a.weight.copy_(torch.eye(H))
    if mode == "local_p":
        dot.load_state_dict({k: v for k, v in general.state_dict().items() if k != "W_a.weight"})
    c1, w1, p1 = attend(general, *inputs())
    c2, w2, p2 = attend(dot, *inputs())
    torch.testing.assert_close(w1, w2)
    torch.testing.assert_close(c1, c2)


def test_dot_global_matches_scaled_dot_product_attention():
    """Unscaled dot-product global attention is PyTorch's SDPA with scale=1 and a padding mask."""
    q, mem, mask, lens, pos = inputs()
    context, w, _ = attend(LuongAttention("dot", "global", H), q, mem, mask, lens, pos)
    ref = F.scaled_dot_product_attention(q, mem, mem, attn_mask=mask.unsqueeze(1), scale=1.0)
    torch.testing.assert_close(context, ref)


def test_concat_score_formula():
    """concat: v_aᵀ tanh(W_q h_t + W_k h̄_s), softmaxed over real positions."""
    torch.manual_seed(3)
    att = LuongAttention("concat", "global", H)
    q, mem, mask, lens, pos = inputs()
    _, w, _ = attend(att, q, mem, mask, lens, pos)
    b, t = 1, 4
    n = int(LENS[b])
    scores = torch.stack([att.v_a(torch.tanh(att.W_q(q[b, t]) + att.W_k(mem[b, s]))).squeeze() for s in range(n)])
    torch.testing.assert_close(w[b, t, :n], torch.softmax(scores, 0))


def test_local_p_position_scales_with_sentence_length():
    """p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)): the same decoder state predicts a position twice as
    far into a sentence twice as long."""
    torch.manual_seed(4)
    att = LuongAttention("general", "local_p", H, window=D)
    q = torch.randn(1, 2, H).expand(2, 2, H)
    mem = torch.randn(2, 6, H)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, 3:] = False
    _, _, p = att(q, att.keys(mem), mem, mask, torch.tensor([3.0, 6.0]), torch.arange(2.0))
    torch.testing.assert_close(p[1], 2 * p[0])


def test_local_p_gradients_reach_the_position_predictor():
    """The Gaussian makes p_t differentiable: v_p and W_p receive non-zero gradients."""
    torch.manual_seed(5)
    att = LuongAttention("general", "local_p", H, window=D)
    q, mem, mask, lens, pos = inputs()
    mem.requires_grad_(True)
    context, _, _ = attend(att, q, mem, mask, lens, pos)
    (context * torch.randn_like(context)).sum().backward()
    for name in ("v_p", "W_p", "W_a"):
        grad = getattr(att, name).weight.grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_unknown_score_or_mode():
    with pytest.raises(ValueError, match="score"):
        LuongAttention("cosine", "global", H)
    with pytest.raises(ValueError, match="mode"):
        LuongAttention("dot", "local", H)


@pytest.mark.parametrize("score,mode,heads,gather_above", [
    *((s, m, 1, 20.0) for s, m in itertools.product(SCORES, MODES)), ("location", "local_p", 1, 20.0),
    ("scaled_dot", "local_m", 1, 20.0), ("dot", "local_p", 2, 20.0), ("general", "local_m", 1, 0.0)])
def test_hypotheses_share_their_sentences_source(score, mode, heads, gather_above):
    """The fast engine's attention, given a query of k rows per sentence (a beam's hypotheses, sentence by sentence)
    against the source kept once per sentence, gives what the paper's gives against the source repeated k times, row
    for row: weights, context and p_t, at one step (the search's) and over T steps, through the whole source or the
    gathered window (gather_above 0)."""
    torch.manual_seed(3)
    att = FastAttention(score, mode, H, window=D, heads=heads, max_len=S, gather_above=gather_above)
    plain = LuongAttention(score, mode, H, window=D, heads=heads, max_len=S, gather_above=gather_above)
    plain.load_state_dict(att.state_dict())
    _, mem, mask, lens, pos = inputs()
    k = 4
    for steps in (1, 3):
        query = torch.randn(B * k, steps, H)
        rep = torch.arange(B).repeat_interleave(k)  # (B·k,) each row's sentence
        shared = attend(att, query, mem, mask, lens, pos[2 : 2 + steps])
        repeated = attend(plain, query, mem[rep], mask[rep], lens[rep], pos[2 : 2 + steps])
        for a, b in zip(shared, repeated):
            if b is None:
                assert a is None
                continue
            assert a.shape == b.shape
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("score,mode", list(itertools.product(("dot", "general", "concat", "scaled_dot"),
                                                               ("local_m", "local_p"))))
def test_gathering_the_window_equals_masking_the_source(score, mode):
    """The O(D) path (gather the 2D+1 positions around p_t) gives the same weights, context and
    gradients as masking the whole source, on long padded sources of mixed lengths; so does it
    with the source tapped for the O(D) backward (``tap``), over several steps as in the decoder."""
    torch.manual_seed(7)
    Bq, Sq, Tq, D2 = 3, 40, 6, 3
    lens = torch.tensor([40, 23, 9])
    mask = torch.arange(Sq).unsqueeze(0) < lens.unsqueeze(1)
    results = []
    for gather_above, tapped in ((math.inf, False), (0.0, False), (0.0, True)):
        torch.manual_seed(8)
        att = (FastAttention if tapped else LuongAttention)(score, mode, H, window=D2, gather_above=gather_above)
        memory = (torch.randn(Bq, Sq, H) * mask.unsqueeze(-1)).requires_grad_(True)
        query = torch.randn(Bq, Tq, H, requires_grad=True)
        pos = torch.arange(Tq, dtype=torch.float) * 5  # local_m: centres spread over the sentence
        keys, values = att.keys(memory), memory
        if tapped:
            keys, values = (tap(values),) * 2 if keys is memory else (tap(keys), tap(values))
        steps = [att(query[:, t : t + 1], keys, values, mask, lens.float(), pos[t : t + 1]) for t in range(Tq)]
        context, w, p = (torch.cat(x, 1) for x in zip(*steps))
        (context * torch.linspace(-1, 1, H)).sum().backward()
        grads = [query.grad, memory.grad] + [q.grad for q in att.parameters()]
        results.append((context.detach(), w.detach(), p.detach(), grads))
    (c1, w1, p1, g1) = results[0]
    for c2, w2, p2, g2 in results[1:]:
        torch.testing.assert_close(w1, w2)
        torch.testing.assert_close(c1, c2)
        torch.testing.assert_close(p1, p2)
        for a, b in zip(g1, g2):
            torch.testing.assert_close(a, b)


def assert_same_loss_and_gradients(models, src, tgt) -> None:
    """Every model gives the first one's loss and parameter gradients on the batch (src, tgt)."""
    from nmt.batching import make_batch
    from nmt.update import batch_loss

    grads = []
    for model in models:
        loss = batch_loss(model, make_batch(src, tgt, range(len(src))))
        loss.backward()
        grads.append([loss.detach()] + [p.grad for p in model.parameters()])
    for other in grads[1:]:
        for a, b in zip(grads[0], other):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("mode", ["local_m", "local_p"])
def test_whole_model_gradients_do_not_depend_on_the_window_path(make_model, random_sources, mode):
    """Training through the gathered window (sources tapped in ``Seq2Seq.encode``) gives the same
    loss and parameter gradients as masking the whole source."""
    models = []
    for gather_above in (math.inf, 0.0):
        models.append(make_model(mode=mode, window=2, seed=5, train=False, gather_above=gather_above))
    assert_same_loss_and_gradients(models, random_sources(4, 5, 30, 23, seed=3), random_sources(4, 3, 12, 19, seed=4))


@pytest.mark.parametrize("score,mode", list(itertools.product(("dot", "general", "concat", "scaled_dot", "location"),
                                                               ("global", "local_m", "local_p"))))
def test_deferred_source_gradients_equal_autograd(make_model, random_sources, score, mode):
    """Summing the steps' gradients for keys and memory once per batch (``tap``) gives the loss and
    parameter gradients of plain autograd, for every score and mode, with padding."""
    models = []
    for engine in ("plain", "fast"):
        models.append(make_model(score=score, mode=mode, window=2, seed=6, train=False, engine=engine))
    assert_same_loss_and_gradients(models, random_sources(4, 2, 9, 23, seed=3), random_sources(4, 1, 7, 19, seed=4))


def test_deferred_step_weight_gradients_equal_autograd(make_model, random_sources):
    """A two-layer input-feeding decoder's step weights (layer 0 over [h̃; h], layer 1 with its bias), tapped,
    get the loss and gradients of plain autograd."""
    models = []
    for engine in ("plain", "fast"):
        models.append(make_model(decoder_layers=2, encoder_layers=2, seed=7, train=False, engine=engine))
    assert_same_loss_and_gradients(models, random_sources(4, 2, 9, 23, seed=3), random_sources(4, 1, 7, 19, seed=4))


def test_deferred_gradients_under_bf16_autocast_are_within_bf16_rounding(make_model, random_sources):
    """Under bf16 autocast the step weights are cast once per batch and their steps' gradients summed in one
    bf16 matmul: every parameter's gradient stays within 2 % (relative norm) of fp32 autograd's, as plain
    autograd's bf16 gradients do (0.7-0.9 % on this batch)."""
    from nmt.batching import make_batch
    from nmt.device import autocast
    from nmt.update import batch_loss

    batch = make_batch(random_sources(4, 2, 9, 23, seed=3), random_sources(4, 1, 7, 19, seed=4), range(4))
    grads = []
    for engine, precision in (("plain", "fp32"), ("fast", "bf16")):
        model = make_model(decoder_layers=2, encoder_layers=2, seed=7, train=False, engine=engine)
        with autocast(torch.device("cpu"), precision):
            batch_loss(model, batch).backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    for name, ref in grads[0].items():
        assert (grads[1][name] - ref).norm() <= 0.02 * ref.norm(), name
