"""int8 matmuls on the CPU for the fast engine: ``Int8Linear``, through the kernels of torch's dynamic int8 ``Linear``.

PyTorch's dynamic quantization (the ``torch.ops.quantized`` kernels of ``torch.ao.nn.quantized.dynamic.Linear``): its
fbgemm and oneDNN kernels ship in every CPU build of torch, so int8 needs no other dependency. Activations are
quantized at each call over all 8 bits where the CPU multiplies int8 without saturating 16-bit sums (VNNI or AMX:
``full_range``); torch's own dynamic ``Linear`` always keeps them to 7 bits (``reduce_range``), which the AVX2-only
kernels need. Which of the model's matmuls run in int8: nmt/int8.py.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch
from torch import nn
from torch.ao.quantization import per_channel_dynamic_qconfig

from nmt.device import cpu_flags


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch 2.13 warns that its quantized tensor functions are deprecated (a removal announced for 2.10 and not
    made); the kernels are the ones ``torch.ao.quantization.quantize_dynamic`` uses. One place silences it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(deprecated|will be removed).*")
        yield


# int8 dot products that add up in 32 bits: the activations may use all of uint8 (AVX2's vpmaddubsw adds pairs in 16 bits)
FULL_RANGE_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def full_range(flags: frozenset[str] | None = None) -> bool:
    """Whether activations may be quantized over all 8 bits on this CPU (``flags``: its /proc/cpuinfo flags)."""
    return any(f in (cpu_flags() if flags is None else flags) for f in FULL_RANGE_FLAGS)


class Int8Linear(nn.Module):
    """``x @ weightᵀ + bias`` with ``weight`` (out, in) in int8, per output channel, through the kernels of torch's
    dynamic int8 ``Linear`` (``torch.ops.quantized``), the activations quantized at each call over 7 or 8 bits
    (``reduce_range``: 7 unless ``full_range()``; torch's own module always takes 7)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        observer = per_channel_dynamic_qconfig.weight()  # symmetric, per output channel, as quantize_dynamic's
        w = weight.detach().float()
        observer(w)
        scale, zero_point = observer.calculate_qparams()
        with _quiet():
            qweight = torch.quantize_per_channel(w, scale.double(), zero_point.long(), 0, torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(qweight, None if bias is None else bias.detach().float())
        self.reduce_range = not full_range()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic(x, self.packed, reduce_range=self.reduce_range).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, reduce_range={self.reduce_range}"


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None = None) -> Int8Linear:
    """``x @ weightᵀ (+ bias)`` with ``weight`` (out, in) in int8, per output channel."""
    return Int8Linear(weight, bias)
