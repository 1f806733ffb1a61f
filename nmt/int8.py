"""int8 decoding on the CPU: the model's matmuls with int8 weights, activations quantized at each call.

torch's own dynamic quantization kernels (``Int8Linear``, nmt/engine/int8.py): no other dependency; torchao's int8
path ran slower than fp32 in eager mode here (docs/decoding.md#int8). What runs in int8:

- every ``nn.Linear`` of the decoder: W_s (the vocabulary projection), W_c and the attention's (per channel);
- the fast engine's written-out LSTM step, one matmul per layer (``FastDecoder.matmul``, per channel, packed once
  per weight).

The encoder, the embeddings, layer 0's projected-embedding table (lookups), the softmaxes, the cell's pointwise
maths and the search stay fp32. The encoder runs once a batch: in int8 (torch's dynamic LSTM, weights per
tensor) it cost the 15-minute local-p model about a quarter of a test BLEU point for no speed. On a 2-core EPYC
with avx512_vnni the 15-minute local-p model's dev BLEU went from 0.69 below fp32 (7-bit activations) to 0.11
below (test: 0.03 below, 0.17 above) at the same speed (docs/decoding.md#int8).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Union

from torch import nn

from nmt.build import build_model
from nmt.checkpoint import load_model
from nmt.config import ModelConfig
from nmt.engine.decoder import FastDecoder
from nmt.engine.int8 import Int8Linear, full_range
from nmt.model import Seq2Seq
from nmt.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def _swap(module: nn.Module, skip: nn.Module) -> None:
    """Replace every ``nn.Linear`` under ``module`` (not under ``skip``) by a dynamic int8 one, weights per channel."""
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, Int8Linear(child.weight, child.bias))
        elif child is not skip:
            _swap(child, skip)


def quantize(model: Seq2Seq) -> Seq2Seq:
    """``model`` (fast engine, on the CPU) with its decoder's ``nn.Linear``s in int8, in place, in eval mode. The
    decoder's own RNN keeps its fp32 parameters: the written-out step reads them and packs int8 copies of its
    matmuls' weights; a GRU decoder's RNN runs in fp32."""
    if not isinstance(model.decoder, FastDecoder):
        raise ValueError("quantize: int8 runs in the fast engine: build the model with engine='fast' (the default)")
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("precision int8 runs on the CPU only (PyTorch's quantized kernels): use device cpu")
    model.eval()
    _swap(model.decoder, skip=model.decoder.rnn)
    model.decoder.int8 = {}
    return model


def int8_model(model: Seq2Seq, cfg: ModelConfig) -> Seq2Seq:
    """An int8 copy of ``model`` (config ``cfg``) for decoding on the CPU: built in the fast engine, given ``model``'s
    weights, then quantized."""
    vocab = model.encoder.embed.num_embeddings, model.decoder.embed.num_embeddings
    copy = build_model(cfg, *vocab)
    copy.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    return quantize(copy)


def load_int8(path: Union[str, Path]) -> tuple[Seq2Seq, Tokenizer, Any, dict]:
    """``nmt.checkpoint.load_model`` for int8 decoding: model (quantized, eval, CPU), tokenizer, config, raw state."""
    model, tok, cfg, state = load_model(path, "cpu")
    if not full_range():
        log.info("int8 on a CPU without VNNI or AMX int8: activations keep 7 bits, so BLEU may move by a few tenths "
                 "and the gain over fp32 is smaller (docs/decoding.md#int8)")
    return int8_model(model, cfg.model), tok, cfg, state
