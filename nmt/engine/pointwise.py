"""The fast engine's pointwise maths: the CPU's fp32 tanh as 2σ(2x) − 1, an LSTM cell's four gates in one sigmoid.

torch's CPU tanh costs about 4× its sigmoid (1.8 against 0.45 ms for (5000, 256) on an AVX-512 EPYC), and an LSTM
layer's four gates take one sigmoid call instead of four; the values differ from torch's tanh by at most 2.4e-7
(``tests/test_engine.py``). Whole passes gain little (fp32 about 1 %, int8 beam search about 4 %: docs/benchmarks.md).
"""

from __future__ import annotations

import torch

_SCALES: dict[tuple, torch.Tensor] = {}  # (4H, device) -> [1; 1; 2; 1] per gate: g's tanh as 2σ(2g) − 1


def fast(x: torch.Tensor) -> bool:
    """Whether tanh as 2σ(2x) − 1 pays and keeps fp32's accuracy: fp32 on the CPU, outside an ONNX export (whose
    runtimes have a fast Tanh); in bf16 2σ(2x) − 1 would lose small values to σ's rounding near 1/2."""
    return x.dtype == torch.float32 and x.device.type == "cpu" and not torch.onnx.is_in_onnx_export()


def sigmoid_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2σ(2x) − 1, in place where autograd allows (a fresh tensor either way)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return torch.sigmoid(x * 2) * 2 - 1
    return (x * 2).sigmoid_().mul_(2).sub_(1)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x), by 2σ(2x) − 1 where that is faster (``fast``)."""
    return sigmoid_tanh(x) if fast(x) else torch.tanh(x)


def lstm(gates: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h_t, c_t from the gate pre-activations [i; f; g; o] (batch, 4H) and c_{t-1} (batch, H)."""
    if not fast(gates):
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    key = (gates.size(-1), gates.device)
    scale = _SCALES.get(key)
    if scale is None:
        scale = _SCALES[key] = torch.ones(key[0], device=gates.device).index_fill_(
            0, torch.arange(key[0] // 2, 3 * key[0] // 4, device=gates.device), 2.0)
    i, f, g, o = (gates * scale).sigmoid_().chunk(4, -1)  # σ(i), σ(f), σ(2g), σ(o)
    c = torch.addcmul(f * c0, i, g * 2 - 1)
    return o * sigmoid_tanh(c), c
