"""The seam between the paper's equations and the speed machinery behind them.

``attention.py``, ``decoder.py`` and ``model.py`` compute the few operations of the decoder's loop that
touch the whole source or a step's weights through an ``Ops``:

    tap(x)               mark a tensor used at every step (the batch's keys and memory, a step's weights)
    bmm(a, x, transpose) a @ xᵀ (scores) or a @ x (context) against the source
    gather(x, index)     the 2D + 1 window of a long source (local modes)
    addmm(bias, x, w)    bias + x wᵀ, one LSTM step
    lstm(gates, c)       an LSTM layer's pointwise step from its gate pre-activations: (h, c)
    tanh(x)              the attentional state's, concat's and local-p's tanh
    loop(step)           the decoder's loop step as it runs: itself, or compiled (``Ops(compile_step=True)``)

``Ops`` is plain torch; with ``compile_step`` its loop step goes through ``torch.compile`` (nmt/compiled_step.py).
``FastOps`` computes fp32 tanh on the CPU as 2σ(2x) − 1: torch's CPU tanh costs about 4× its sigmoid (1.8 against
0.45 ms for (5000, 256) on an AVX-512 EPYC), and an LSTM layer's four gates take one sigmoid call instead of four
calls; the values differ from torch's tanh by at most 2.4e-7 (``tests/test_ops.py``). Whole passes gain little
(fp32 about 1 %, int8 beam search about 4 %: docs/benchmarks.md, "Speed work kept").
``nmt.source_grad.DeferredOps`` (a ``FastOps``) computes the same values, but sums the gradients
that a tapped tensor gets from every step in one matmul per batch, not one outer product per step.
``build_model`` plugs in ``fast_ops()``. ``tests/test_attention.py`` checks that both give the same loss
and the same gradients for every score and mode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class Ops:
    """Plain torch: what the equations say, and autograd's gradients."""

    defers = False  # True: the tap sums the steps' gradients (so a weight cast once per batch sums them in fp32)

    def __init__(self, compile_step: bool = False):
        self.compile_step = compile_step

    def loop(self, step: Callable) -> Callable:
        """``step`` (the decoder's ``_step``) as the loop calls it: itself, or compiled with an eager fallback."""
        if not self.compile_step:
            return step
        from nmt.compiled_step import CompiledStep  # imports torch.compile's machinery only when asked for

        return CompiledStep(step)

    def tap(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def bmm(self, a: torch.Tensor, x: torch.Tensor, transpose: bool = False) -> torch.Tensor:
        return torch.bmm(a, x.transpose(1, 2) if transpose else x)

    def gather(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.gather(1, index)

    def addmm(self, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias, x, w.t())

    def lstm(self, gates: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_t, c_t from the gate pre-activations [i; f; g; o] (batch, 4H) and c_{t-1} (batch, H)."""
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


PLAIN = Ops()


def _fast(x: torch.Tensor) -> bool:
    """Whether tanh as 2σ(2x) − 1 pays and keeps fp32's accuracy: fp32 on the CPU, outside an ONNX export (whose
    runtimes have a fast Tanh); in bf16 2σ(2x) − 1 would lose small values to σ's rounding near 1/2."""
    return x.dtype == torch.float32 and x.device.type == "cpu" and not torch.onnx.is_in_onnx_export()


def sigmoid_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2σ(2x) − 1, in place where autograd allows (a fresh tensor either way)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return torch.sigmoid(x * 2) * 2 - 1
    return (x * 2).sigmoid_().mul_(2).sub_(1)


class FastOps(Ops):
    """``Ops``' values by faster CPU kernels: tanh as 2σ(2x) − 1 (fp32, CPU), an LSTM's gates in one sigmoid call."""

    def __init__(self, compile_step: bool = False):
        super().__init__(compile_step)
        self.scales: dict[tuple, torch.Tensor] = {}  # (4H, device) -> [1; 1; 2; 1] per gate: g's 2σ(2g) − 1

    def lstm(self, gates: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not _fast(gates):
            return super().lstm(gates, c0)
        key = (gates.size(-1), gates.device)
        scale = self.scales.get(key)
        if scale is None:
            scale = self.scales[key] = torch.ones(key[0], device=gates.device).index_fill_(
                0, torch.arange(key[0] // 2, 3 * key[0] // 4, device=gates.device), 2.0)
        i, f, g, o = (gates * scale).sigmoid_().chunk(4, -1)  # σ(i), σ(f), σ(2g), σ(o)
        c = torch.addcmul(f * c0, i, g * 2 - 1)
        return o * sigmoid_tanh(c), c

    def tanh(self, x: torch.Tensor) -> torch.Tensor:
        return sigmoid_tanh(x) if _fast(x) else torch.tanh(x)


def fast_ops(compile_step: bool = False) -> Ops:
    """The training path's ops: deferred per-step gradients (nmt/source_grad.py), the loop step compiled if asked."""
    from nmt.source_grad import DeferredOps  # source_grad subclasses Ops: imported here, not at the top

    return DeferredOps(compile_step)
