"""The decoder's LSTM step written out with ``nn.LSTM``'s own parameters: speed machinery beside the paper's
``Decoder``, which calls it for LSTM decoders.

An ``nn.LSTM`` call per step and layer costs 3-4× an addmm, so each layer's step is one matmul over
[input; h] (through ``nmt.ops``, whose fast form sums the steps' weight gradients once per batch). Layer 0's
projection of the embeddings is one matmul over all steps; in search it is a table lookup, the table
cached until the weights change.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Optional

import torch
from torch import nn

from nmt.ops import Ops

if TYPE_CHECKING:
    from nmt.decoder import Decoder

TABLE_MAX = 1 << 24  # elements of the search's embedding table (64 MB in fp32): bench-small's is 4.1 M
Weights = list[tuple[torch.Tensor, Optional[torch.Tensor]]]  # per layer: (4H, [input; H]) matrix, bias (None: layer 0)


def step_weights(rnn: nn.RNNBase, emb_dim: int, input_feeding: bool) -> Optional[Weights]:
    """The per-layer [input; h] weight matrices and biases of an LSTM (None for GRU and RNN)."""
    if rnn.mode != "LSTM":
        return None
    first = torch.cat([rnn.weight_ih_l0[:, emb_dim:], rnn.weight_hh_l0], 1) if input_feeding else rnn.weight_hh_l0
    w: Weights = [(first, None)]  # (4H, 2H) over [feed; h], or (4H, H) over h without input feeding
    for layer in range(1, rnn.num_layers):
        W = torch.cat([getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")], 1)  # (4H, 2H)
        w.append((W, getattr(rnn, f"bias_ih_l{layer}") + getattr(rnn, f"bias_hh_l{layer}")))
    return w


def project_inputs(rnn: nn.RNNBase, emb: torch.Tensor, w: Optional[Weights]) -> torch.Tensor:
    """Layer 0's input projection of the embeddings (LSTM, (..., 4H)); the embeddings themselves otherwise."""
    if w is None:
        return emb
    return nn.functional.linear(emb, rnn.weight_ih_l0[:, : emb.size(-1)], rnn.bias_ih_l0 + rnn.bias_hh_l0)


def loop_weights(w: Optional[Weights], ops: Ops, device_type: str) -> Optional[Weights]:
    """``step_weights`` for the teacher-forced loop: with fast ops in training tapped, their steps' gradients summed
    in one matmul per batch, and under autocast cast once, not at every step (without the tap a cast weight would
    sum its steps' gradients in bf16)."""
    defer = torch.is_grad_enabled() and ops.defers
    if w is None or (torch.is_grad_enabled() and not defer):
        return w
    if torch.is_autocast_enabled(device_type):
        w = [(W.to(torch.get_autocast_dtype(device_type)), b) for W, b in w]
    return [(ops.tap(W), b) for W, b in w] if defer else w


def cell(x: torch.Tensor, feed: Optional[torch.Tensor], state, w: Weights, ops: Ops,
         dropout: nn.Module) -> tuple[torch.Tensor, tuple[list, list]]:
    """One step of every layer: x (batch, 4H) layer 0's projected input, feed h̃_{t-1} (batch, 1, hidden) or None
    without input feeding, state (h, c) indexed by layer; ``dropout`` between layers. The top h (batch, 1, hidden)
    and the per-layer (h, c) lists."""
    h0, c0 = state
    hs, cs = [], []
    inp = feed.squeeze(1) if feed is not None else None  # (batch, hidden)
    for layer, (W, b) in enumerate(w):
        rec = h0[layer] if inp is None else torch.cat([inp, h0[layer]], -1)  # (batch, H or 2H)
        gates = ops.addmm(x if layer == 0 else b, rec, W)  # (batch, 4H)
        hl, c = ops.lstm(gates, c0[layer])  # σ(o)·tanh(c), σ(f)·c_{t-1} + σ(i)·tanh(g)
        hs.append(hl)
        cs.append(c)
        inp = dropout(hl) if layer + 1 < len(w) else hl
    return inp.unsqueeze(1), (hs, cs)


class SearchWeights:
    """What a search step reads, computed once: ``step_weights``, the embedding table through layer 0's projection
    (vocab, 4H; none past TABLE_MAX elements) and, for bf16_output, W_s and its bias in bf16. Rebuilt when a
    parameter is replaced (``.to()``, a new tensor), and cleared when the model trains or loads a state dict (the
    decoder's hooks); code that writes the weights in place otherwise calls ``clear()``."""

    def __init__(self) -> None:
        self.key: Optional[tuple] = None
        self.w: Optional[Weights] = None
        self.table: Optional[torch.Tensor] = None
        self.out_bf16: Optional[nn.Module] = None

    def clear(self) -> None:
        self.key = None

    @torch.no_grad()
    def get(self, decoder: Decoder, bf16_output: bool) -> tuple[Optional[Weights], Optional[torch.Tensor], Optional[nn.Module]]:
        key = tuple(p.data_ptr() for p in decoder.parameters())
        if self.key != key:
            w, table = decoder.step_weights(), None
            if w is not None and decoder.embed.num_embeddings * w[0][0].size(0) <= TABLE_MAX:
                with torch.autocast(decoder.embed.weight.device.type, enabled=False):  # fp32 under bf16 decoding too
                    table = project_inputs(decoder.rnn, decoder.embed.weight, w)  # (vocab, 4H)
            self.key, self.w, self.table, self.out_bf16 = key, w, table, None
        if bf16_output and self.out_bf16 is None:
            self.out_bf16 = copy.deepcopy(decoder.out).bfloat16()  # nn.Linear, or nmt.tied.TiedOutput
        return self.w, self.table, self.out_bf16 if bf16_output else None
