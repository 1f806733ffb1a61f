"""int8 decoding on the CPU: the model's matmuls with int8 weights, activations quantized at each call.

PyTorch's dynamic quantization (the ``torch.ops.quantized`` kernels of ``torch.ao.nn.quantized.dynamic.Linear``,
called by ``Int8Linear``): its fbgemm and oneDNN kernels ship in every CPU build of torch, so int8 needs no other
dependency; torchao's int8 path ran slower than fp32 in eager mode here (docs/decoding.md#int8). What runs in int8:

- every ``nn.Linear`` of the decoder: W_s (the vocabulary projection), W_c and the attention's (per channel);
- the written-out LSTM step's one matmul per layer (``Int8Ops.addmm``, per channel, packed once per weight).

Activations are quantized at each call over all 8 bits where the CPU multiplies int8 without saturating 16-bit sums
(VNNI or AMX: ``full_range``); torch's own dynamic ``Linear`` always keeps them to 7 bits (``reduce_range``), which
the AVX2-only kernels need. On a 2-core EPYC with avx512_vnni the 15-minute local-p model's dev BLEU went from 0.69
below fp32 to 0.11 below (test: 0.03 below, 0.17 above) at the same speed (docs/decoding.md#int8).

The encoder, the embeddings, layer 0's projected-embedding table (lookups), the softmaxes, the cell's pointwise
maths and the search stay fp32. The encoder runs once a batch: in int8 (torch's dynamic LSTM, weights per
tensor) it cost the 15-minute local-p model about a quarter of a test BLEU point for no speed. A model for
int8 is built with ``Int8Ops`` and then ``quantize``-d: ``int8_model``, ``load_int8``.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import torch
from torch import nn
from torch.ao.quantization import per_channel_dynamic_qconfig

from nmt.config import ModelConfig
from nmt.device import cpu_flags
from nmt.model import Seq2Seq, build_model
from nmt.ops import FastOps
from nmt.tokenizer import Tokenizer

log = logging.getLogger(__name__)


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


class Int8Ops(FastOps):
    """``FastOps`` whose ``addmm`` (the written-out LSTM step) multiplies by an int8 copy of the weight, packed
    the first time that weight tensor is seen (the search's step weights are cached, so once per model)."""

    def __init__(self) -> None:
        super().__init__()
        self.packed: dict[int, nn.Module] = {}  # id(weight) -> its int8 Linear; the entry leaves with the weight

    def addmm(self, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        q = self.packed.get(id(w))
        if q is None:
            q = self.packed[id(w)] = int8_linear(w)
            weakref.finalize(w, self.packed.pop, id(w), None)
        return q(x).add_(bias)  # bias: (4H,), or layer 0's projected input (batch, 4H); q(x) is a fresh tensor


def _swap(module: nn.Module, skip: nn.Module) -> None:
    """Replace every ``nn.Linear`` under ``module`` (not under ``skip``) by a dynamic int8 one, weights per channel."""
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, Int8Linear(child.weight, child.bias))
        elif child is not skip:
            _swap(child, skip)


def quantize(model: Seq2Seq) -> Seq2Seq:
    """``model`` (built with ``Int8Ops``, on the CPU) with its decoder's ``nn.Linear``s in int8, in place, in eval
    mode. The decoder's own RNN keeps its fp32 parameters: the written-out step reads them (``Int8Ops`` packs the
    matmuls); a GRU decoder's RNN runs in fp32."""
    if not isinstance(model.decoder.ops, Int8Ops):
        raise ValueError("quantize: build the model with ops=Int8Ops() (nmt.int8.int8_model does)")
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("precision int8 runs on the CPU only (PyTorch's quantized kernels): use device cpu")
    model.eval()
    _swap(model.decoder, skip=model.decoder.rnn)
    return model


def int8_model(model: Seq2Seq, cfg: ModelConfig) -> Seq2Seq:
    """An int8 copy of ``model`` (config ``cfg``) for decoding on the CPU: built with ``Int8Ops``, given ``model``'s
    weights, then quantized."""
    vocab = model.encoder.embed.num_embeddings, model.decoder.embed.num_embeddings
    copy = build_model(cfg, *vocab, Int8Ops())
    copy.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    return quantize(copy)


def load_int8(path: Union[str, Path]) -> tuple[Seq2Seq, Tokenizer, Any, dict]:
    """``nmt.checkpoint.load_model`` for int8 decoding: model (quantized, eval, CPU), tokenizer, config, raw state."""
    from nmt.checkpoint import load_model

    model, tok, cfg, state = load_model(path, "cpu")
    if not full_range():
        log.info("int8 on a CPU without VNNI or AMX int8: activations keep 7 bits, so BLEU may move by a few tenths "
                 "and the gain over fp32 is smaller (docs/decoding.md#int8)")
    return int8_model(model, cfg.model), tok, cfg, state
