"""The contract between the two engines (nmt/build.py): the paper's plain modules and the fast engine (nmt/engine/)
give the same losses, gradients and translations for every score × mode, LSTM and GRU, input feeding on and off,
one and two layers; both load the same checkpoints, those written before the engines were split among them. Also
the engine's pointwise maths against plain torch."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.build import build_model
from nmt.config import ModelConfig
from nmt.engine import pointwise
from nmt.search import beam_search
from nmt.update import batch_loss

SCORES, MODES = ("dot", "general", "concat"), ("global", "local_m", "local_p")
SHAPES = [(rnn, feeding, layers) for rnn in ("lstm", "gru") for feeding in (True, False) for layers in (1, 2)]
COMBOS = list(itertools.product(SCORES, MODES))


def shapes(score: str, mode: str) -> list[tuple[str, bool, int]]:
    """Three of the eight RNN shapes for a score × mode, in turn: each shape meets three or more of the nine."""
    i = COMBOS.index((score, mode))
    return [SHAPES[(i + j) % len(SHAPES)] for j in (0, 3, 5)]
BEFORE = Path(__file__).parent / "data" / "decoder_before_engines.pt"  # written by 244ca12's build_model


def pair(make_model, **kw):
    """The same seeded model in both engines: (plain, fast)."""
    return make_model(engine="plain", **kw), make_model(engine="fast", **kw)


def loss_and_grads(model, batch, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)  # the dropout masks: both engines draw them in the same order
    loss = batch_loss(model, batch, label_smoothing=0.1)
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("score,mode", COMBOS)
def test_both_engines_train_alike(make_model, random_sources, score, mode):
    """Loss and every parameter's gradient, in training mode with dropout between layers, on a padded batch."""
    batch = make_batch(random_sources(5, 2, 9, 23, seed=3), random_sources(5, 1, 8, 19, seed=4), range(5))
    for rnn, feeding, layers in shapes(score, mode):
        plain, fast = pair(make_model, score=score, mode=mode, window=2, rnn_type=rnn, input_feeding=feeding,
                           decoder_layers=layers, encoder_layers=layers, dropout=0.3, train=True, seed=5)
        shape = f"{rnn}, input feeding {feeding}, {layers} layers"
        for a, b in zip(loss_and_grads(plain, batch, 9), loss_and_grads(fast, batch, 9)):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=2e-6, msg=lambda m, shape=shape: f"{shape}: {m}")


@pytest.mark.parametrize("score,mode", COMBOS)
def test_both_engines_translate_alike(make_model, random_sources, score, mode):
    """Greedy and beam 5 (n-best 2): the same tokens and scores, sentence by sentence."""
    batch = make_batch(random_sources(6, 2, 6, 23, seed=7), [[4]] * 6, range(6))
    for rnn, feeding, layers in shapes(score, mode):
        plain, fast = pair(make_model, score=score, mode=mode, window=2, rnn_type=rnn, input_feeding=feeding,
                           decoder_layers=layers, init_range=0.5, seed=6)
        for beam in (1, 5):
            a = beam_search(plain, batch, beam=beam, n_best=min(beam, 2))
            b = beam_search(fast, batch, beam=beam, n_best=min(beam, 2))
            assert b.tokens == a.tokens, (rnn, feeding, layers, beam)
            torch.testing.assert_close(torch.tensor(b.scores), torch.tensor(a.scores), rtol=0, atol=1e-4)


def test_a_checkpoint_from_before_the_split_loads_in_both_engines():
    """244ca12 stored one multi-layer ``decoder.rnn``; both engines load it (a layer per module now) and give its
    logits and beam-3 translations."""
    old = torch.load(BEFORE, weights_only=True)
    assert "decoder.rnn.weight_ih_l1" in old["model"]  # the old layout, as written then
    cfg = OmegaConf.structured(ModelConfig(**{k: v for k, v in old["config"].items() if k != "attention"}))
    cfg.attention = OmegaConf.merge(cfg.attention, old["config"]["attention"])
    batch = make_batch(old["src"], old["tgt"], range(len(old["src"])))
    for engine in ("plain", "fast"):
        model = build_model(cfg, 17, 13, engine)
        model.load_state_dict(old["model"])
        model.eval()
        with torch.no_grad():
            logits, _ = model(batch.src, batch.src_lens, tuple(batch.host_lens.tolist()), batch.tgt_in)
        torch.testing.assert_close(logits, old["logits"], rtol=1e-5, atol=1e-6)
        assert beam_search(model, batch, beam=3).tokens == old["beam3"], engine


def test_the_paper_files_know_nothing_of_the_engine():
    """encoder, attention, decoder and model import only each other and the ground, at every level."""
    import ast

    root = Path(__file__).resolve().parents[1] / "nmt"
    allowed = {"nmt.encoder", "nmt.attention", "nmt.decoder", "nmt.model", "nmt.config", "nmt.vocab", "nmt.tied"}
    for name in ("encoder", "attention", "decoder", "model"):
        tree = ast.parse((root / f"{name}.py").read_text())
        found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        found |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert {m for m in found if m.startswith("nmt")} <= allowed, name
        assert "ops." not in (root / f"{name}.py").read_text(), name


def _gates(rows: int = 37, hidden: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(rows, 4 * hidden) * 3, torch.randn(rows, hidden) * 2


def _plain_lstm(gates: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def test_tanh_equals_torchs_over_its_whole_range():
    x = torch.cat([torch.linspace(-20, 20, 40001), torch.tensor([0.0, 1e-30, -1e-8, 5e-4, 88.0, -100.0])])
    fast = pointwise.tanh(x)
    assert (fast - torch.tanh(x)).abs().max() < 3e-7
    assert fast.abs().max() <= 1.0 and fast[x.abs() > 12].abs().eq(1.0).all()  # saturates as tanh does


def test_lstm_step_equals_the_equations():
    gates, c0 = _gates()
    h, c = _plain_lstm(gates, c0)
    h2, c2 = pointwise.lstm(gates, c0)
    torch.testing.assert_close(c2, c, rtol=0, atol=1e-6)
    torch.testing.assert_close(h2, h, rtol=0, atol=1e-6)
    assert not torch.equal(h2, h)  # the fast kernels ran (else this test compares plain with plain)


@pytest.mark.parametrize("op", ["lstm", "tanh"])
def test_gradients_equal_plain_torchs(op):
    results = []
    for lstm, tanh in ((_plain_lstm, torch.tanh), (pointwise.lstm, pointwise.tanh)):
        gates, c0 = (t.requires_grad_() for t in _gates())
        out = lstm(gates, c0) if op == "lstm" else (tanh(gates), tanh(c0))
        (out[0].pow(2).sum() + out[1].sin().sum()).backward()
        results.append((gates.grad, c0.grad))
    for plain, fast in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_no_grad_leaves_the_input_alone():
    gates, c0 = _gates()
    before = gates.clone(), c0.clone()
    with torch.no_grad():
        pointwise.lstm(gates, c0)
        pointwise.tanh(c0)
    assert torch.equal(gates, before[0]) and torch.equal(c0, before[1])


def test_bf16_keeps_torchs_kernels():
    """2σ(2x) − 1 in bf16 would round small values to 0 (σ near 1/2): bf16 stays on torch's own tanh."""
    gates, c0 = (t.bfloat16() for t in _gates())
    for a, b in zip(pointwise.lstm(gates, c0), _plain_lstm(gates, c0)):
        assert torch.equal(a, b)
    x = torch.tensor([1e-3, -2e-3], dtype=torch.bfloat16)
    assert torch.equal(pointwise.tanh(x), torch.tanh(x))


def test_an_onnx_export_keeps_torchs_tanh(tmp_path):
    """The runtimes have a fast Tanh: the exported graph holds Tanh nodes, not 2σ(2x) − 1."""
    onnx = pytest.importorskip("onnx")

    class Step(torch.nn.Module):
        def forward(self, gates, c0):
            h, c = pointwise.lstm(gates, c0)
            return pointwise.tanh(h), c

    torch.onnx.export(Step(), _gates(), str(tmp_path / "step.onnx"), dynamo=False)
    ops = [n.op_type for n in onnx.load(str(tmp_path / "step.onnx")).graph.node]
    assert ops.count("Tanh") == 3 and ops.count("Sigmoid") == 3
