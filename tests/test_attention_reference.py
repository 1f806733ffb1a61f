"""The batched attention against a slow reference written straight from the paper's equations:
one sentence at a time, one target step at a time, one source position at a time, over the
sentence's real positions only. Weights, contexts and gradients must agree for every score ×
mode, on padded batches of mixed source lengths (and long ones, where local modes gather their
window). Multi-head attention is checked against torch.nn.MultiheadAttention."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from nmt.attention import LuongAttention

H, D = 6, 2


def reference(att: LuongAttention, q: torch.Tensor, mem: torch.Tensor, positions: list[float]):
    """One sentence. q: (T, H) decoder states; mem: (S, H) its real source states only.
    Returns weights (T, S), contexts (T, H) and p_t (T,) (or None)."""
    S = mem.size(0)
    weights, contexts, centres = [], [], []
    for t, h in enumerate(q):
        scores = []
        for s in range(S):
            hs = mem[s]
            if att.score == "dot":
                scores.append(h @ hs)  # h_tᵀ h̄_s
            elif att.score == "general":
                scores.append(h @ (att.W_a.weight @ hs))  # h_tᵀ W_a h̄_s
            elif att.score == "concat":
                W_a = torch.cat([att.W_q.weight, att.W_k.weight], 1)  # W_a [h_t; h̄_s]
                scores.append(att.v_a.weight[0] @ torch.tanh(W_a @ torch.cat([h, hs])))
            elif att.score == "scaled_dot":
                scores.append(h @ hs / math.sqrt(H))
            else:  # location: a_t = softmax(W_a h_t), one weight row per source position
                scores.append(att.W_a.weight[s] @ h)
        scores = torch.stack(scores)
        if att.mode == "global":
            a = torch.softmax(scores, 0)
            p = None
        else:
            if att.mode == "local_m":
                p = torch.tensor(min(positions[t], S - 1.0))  # p_t = t, kept inside the sentence
            else:  # p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))
                p = S * torch.sigmoid(att.v_p.weight[0] @ torch.tanh(att.W_p.weight @ h))
            inside = torch.tensor([abs(s - p) <= att.window for s in range(S)])
            a = torch.zeros(S)
            a[inside] = torch.softmax(scores[inside], 0)
            if att.mode == "local_p":
                sigma = att.window / 2
                a = a * torch.stack([torch.exp(-((s - p) ** 2) / (2 * sigma**2)) for s in range(S)])
        weights.append(a)
        contexts.append(sum(a[s] * mem[s] for s in range(S)))
        centres.append(p)
    return torch.stack(weights), torch.stack(contexts), (torch.stack(centres) if centres[0] is not None else None)


CASES = list(itertools.product(("dot", "general", "concat", "scaled_dot", "location"), ("global", "local_m", "local_p")))


@pytest.mark.parametrize("long", [False, True], ids=["short", "long"])
@pytest.mark.parametrize("score,mode", CASES)
def test_batched_attention_matches_the_reference(score, mode, long):
    lens = torch.tensor([17, 4, 11, 1]) if long else torch.tensor([5, 2, 4, 1])
    B, S, T = len(lens), int(lens.max()), 5
    torch.manual_seed(11)
    att = LuongAttention(score, mode, H, window=D, max_len=32)
    mask = torch.arange(S).unsqueeze(0) < lens.unsqueeze(1)
    memory = (torch.randn(B, S, H) * mask.unsqueeze(-1)).requires_grad_(True)
    query = torch.randn(B, T, H, requires_grad=True)
    positions = torch.arange(T, dtype=torch.float) * (3 if long else 1)
    context, w, p = att(query, att.keys(memory), memory, mask, lens.float(), positions)
    r = torch.randn(B, T, H)
    (context * r).sum().backward()
    fast_grads = [query.grad.clone(), memory.grad.clone()] + [x.grad.clone() for x in att.parameters()]
    for x in [query, memory, *att.parameters()]:
        x.grad = None
    loss = 0.0
    for b in range(B):
        n = int(lens[b])
        rw, rc, rp = reference(att, query[b], memory[b, :n], positions.tolist())
        torch.testing.assert_close(w[b, :, :n], rw.detach(), atol=1e-6, rtol=1e-5)
        assert (w[b, :, n:] == 0).all()
        torch.testing.assert_close(context[b], rc.detach(), atol=1e-6, rtol=1e-5)
        if rp is not None:
            torch.testing.assert_close(p[b], rp.detach().float(), atol=1e-5, rtol=1e-5)
        loss = loss + (rc * r[b]).sum()
    loss.backward()
    ref_grads = [query.grad, memory.grad] + [x.grad for x in att.parameters()]
    for fast, ref in zip(fast_grads, ref_grads):
        torch.testing.assert_close(fast, torch.zeros_like(fast) if ref is None else ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_local_p_weights_are_zero_outside_the_window_and_p_inside_the_sentence(score):
    torch.manual_seed(3)
    lens = torch.tensor([30, 7, 15])
    att = LuongAttention(score, "local_p", H, window=D)
    mask = torch.arange(30).unsqueeze(0) < lens.unsqueeze(1)
    memory = torch.randn(3, 30, H) * mask.unsqueeze(-1)
    query = torch.randn(3, 8, H) * 5
    _, w, p = att(query, att.keys(memory), memory, mask, lens.float(), torch.arange(8.0))
    assert (p >= 0).all() and (p <= lens.unsqueeze(1).float()).all()
    dist = (torch.arange(30).view(1, 1, -1) - p.unsqueeze(-1)).abs()
    assert (w[dist > D] == 0).all() and (w[~mask.unsqueeze(1).expand_as(w)] == 0).all()


@pytest.mark.parametrize("mode", ["global", "local_m", "local_p"])
def test_multi_head_matches_torch_multihead_attention(mode):
    """heads=N with the same projections as torch.nn.MultiheadAttention (no biases) gives its
    output and its head-averaged weights; local modes apply the same window (and Gaussian) to
    every head, which for a window wider than the sentence (local_m) changes nothing; local_p, which
    MHA cannot express, is checked against the heads written out one by one."""
    torch.manual_seed(5)
    heads, hidden, B, S, T = 2, 8, 3, 6, 4
    lens = torch.tensor([6, 3, 5])
    att = LuongAttention("scaled_dot", mode, hidden, window=S + 1 if mode != "local_p" else 2, heads=heads)
    mha = torch.nn.MultiheadAttention(hidden, heads, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([att.W_q.weight, att.W_k.weight, att.W_v.weight]))
        mha.out_proj.weight.copy_(att.W_o.weight)
    mask = torch.arange(S).unsqueeze(0) < lens.unsqueeze(1)
    memory = torch.randn(B, S, hidden) * mask.unsqueeze(-1)
    query = torch.randn(B, T, hidden)
    context, w, p = att(query, att.keys(memory), memory, mask, lens.float(), torch.arange(float(T)))
    if mode == "local_p":  # MHA has no Gaussian: every head written out, window-masked softmax × Gaussian
        dist = torch.arange(S).view(1, 1, -1) - p.unsqueeze(-1)  # (B, T, S)
        assert (w[dist.abs() > 2] == 0).all()
        allowed = mask.unsqueeze(1) & (dist.abs() <= 2)  # (B, T, S)
        gauss = torch.exp(-(dist**2) / (2 * 1.0**2))  # σ = D / 2 = 1
        d = hidden // heads
        q, k, v = (lin(x).view(x.size(0), x.size(1), heads, d) for lin, x in
                   ((att.W_q, query), (att.W_k, memory), (att.W_v, memory)))  # (B, ·, heads, d)
        per_head = [torch.softmax((q[:, :, h] @ k[:, :, h].transpose(1, 2) / math.sqrt(d))
                                  .masked_fill(~allowed, float("-inf")), -1) * gauss for h in range(heads)]
        ref = att.W_o(torch.cat([a @ v[:, :, h] for h, a in enumerate(per_head)], -1))  # (B, T, hidden)
        ref_w = torch.stack(per_head).mean(0)  # (B, T, S)
    else:
        ref, ref_w = mha(query, memory, memory, key_padding_mask=~mask, need_weights=True, average_attn_weights=True)
    torch.testing.assert_close(context, ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-4)


def test_location_score_attends_by_position_only():
    """location: a_t = softmax(W_a h_t) over positions; the source states do not enter the
    weights (only the context), and positions past max_len get no weight."""
    torch.manual_seed(9)
    att = LuongAttention("location", "global", H, max_len=4)
    mask = torch.ones(1, 6, dtype=torch.bool)
    q = torch.randn(1, 2, H)
    _, w1, _ = att(q, att.keys(torch.randn(1, 6, H)), torch.randn(1, 6, H), mask, torch.tensor([6.0]), torch.arange(2.0))
    _, w2, _ = att(q, att.keys(torch.randn(1, 6, H)), torch.randn(1, 6, H), mask, torch.tensor([6.0]), torch.arange(2.0))
    torch.testing.assert_close(w1, w2)
    assert (w1[..., 4:] == 0).all()
