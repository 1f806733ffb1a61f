"""nmt.ops.FastOps: the same values as plain torch (within fp32 rounding), their gradients too, and plain
torch where the trick would lose accuracy (bf16) or where it does not pay (an ONNX export)."""

import pytest
import torch

from nmt.ops import FastOps, Ops


def _gates(rows: int = 37, hidden: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(rows, 4 * hidden) * 3, torch.randn(rows, hidden) * 2


def test_tanh_equals_torchs_over_its_whole_range():
    x = torch.cat([torch.linspace(-20, 20, 40001), torch.tensor([0.0, 1e-30, -1e-8, 5e-4, 88.0, -100.0])])
    fast = FastOps().tanh(x)
    assert (fast - torch.tanh(x)).abs().max() < 3e-7
    assert fast.abs().max() <= 1.0 and fast[x.abs() > 12].abs().eq(1.0).all()  # saturates as tanh does


def test_lstm_step_equals_the_equations():
    gates, c0 = _gates()
    h, c = Ops().lstm(gates, c0)
    i, f, g, o = gates.chunk(4, -1)
    c_ref = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    torch.testing.assert_close(c, c_ref, rtol=0, atol=0)
    torch.testing.assert_close(h, torch.sigmoid(o) * torch.tanh(c_ref), rtol=0, atol=0)
    h2, c2 = FastOps().lstm(gates, c0)
    torch.testing.assert_close(c2, c, rtol=0, atol=1e-6)
    torch.testing.assert_close(h2, h, rtol=0, atol=1e-6)
    assert not torch.equal(h2, h)  # the fast kernels ran (else this test compares plain with plain)


@pytest.mark.parametrize("op", ["lstm", "tanh"])
def test_gradients_equal_plain_torchs(op):
    results = []
    for ops in (Ops(), FastOps()):
        gates, c0 = (t.requires_grad_() for t in _gates())
        out = ops.lstm(gates, c0) if op == "lstm" else (ops.tanh(gates), ops.tanh(c0))
        (out[0].pow(2).sum() + out[1].sin().sum()).backward()
        results.append((gates.grad, c0.grad))
    for plain, fast in zip(*results):
        torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_no_grad_leaves_the_input_alone():
    gates, c0 = _gates()
    before = gates.clone(), c0.clone()
    with torch.no_grad():
        FastOps().lstm(gates, c0)
        FastOps().tanh(c0)
    assert torch.equal(gates, before[0]) and torch.equal(c0, before[1])


def test_bf16_keeps_torchs_kernels():
    """2σ(2x) − 1 in bf16 would round small values to 0 (σ near 1/2): bf16 stays on torch's own tanh."""
    gates, c0 = (t.bfloat16() for t in _gates())
    for a, b in zip(FastOps().lstm(gates, c0), Ops().lstm(gates, c0)):
        assert torch.equal(a, b)
    x = torch.tensor([1e-3, -2e-3], dtype=torch.bfloat16)
    assert torch.equal(FastOps().tanh(x), torch.tanh(x))


def test_an_onnx_export_keeps_torchs_tanh(tmp_path):
    """The runtimes have a fast Tanh: the exported graph holds Tanh nodes, not 2σ(2x) − 1."""
    onnx = pytest.importorskip("onnx")

    class Step(torch.nn.Module):
        def forward(self, gates, c0):
            h, c = FastOps().lstm(gates, c0)
            return FastOps().tanh(h), c

    torch.onnx.export(Step(), _gates(), str(tmp_path / "step.onnx"), dynamo=False)
    ops = [n.op_type for n in onnx.load(str(tmp_path / "step.onnx")).graph.node]
    assert ops.count("Tanh") == 3 and ops.count("Sigmoid") == 3
