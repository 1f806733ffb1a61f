"""The fast engine's LSTM step, written out with the decoder's own ``nn.LSTM`` parameters (one per layer).

An ``nn.LSTM`` call per step and layer costs 3-4× an addmm, so each layer's step is one matmul over
[input; h] (whose weight gradients the engine sums once per batch: nmt/engine/deferred.py). Layer 0's
projection of the embeddings is one matmul over all steps; in search it is a table lookup, the table
cached until the weights change (``SearchWeights``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Optional

import torch
from torch import nn

from nmt.decoder import Decoder
from nmt.engine import pointwise
from nmt.engine.deferred import tap

TABLE_MAX = 1 << 24  # elements of the search's embedding table (64 MB in fp32): bench-small's is 4.1 M
Weights = list[tuple[torch.Tensor, Optional[torch.Tensor]]]  # per layer: (4H, [input; H]) matrix, bias (None: layer 0)


def step_weights(rnn: nn.ModuleList, emb_dim: int, input_feeding: bool) -> Optional[Weights]:
    """The per-layer [input; h] weight matrices and biases of an LSTM stack (None for GRU and RNN)."""
    if rnn[0].mode != "LSTM":
        return None
    r0 = rnn[0]
    first = torch.cat([r0.weight_ih_l0[:, emb_dim:], r0.weight_hh_l0], 1) if input_feeding else r0.weight_hh_l0
    w: Weights = [(first, None)]  # (4H, 2H) over [feed; h], or (4H, H) over h without input feeding
    for r in list(rnn)[1:]:
        w.append((torch.cat([r.weight_ih_l0, r.weight_hh_l0], 1), r.bias_ih_l0 + r.bias_hh_l0))  # (4H, 2H), (4H,)
    return w


def project_inputs(rnn: nn.ModuleList, emb: torch.Tensor, w: Optional[Weights]) -> torch.Tensor:
    """Layer 0's input projection of the embeddings (LSTM, (..., 4H)); the embeddings themselves otherwise."""
    if w is None:
        return emb
    r0 = rnn[0]
    return nn.functional.linear(emb, r0.weight_ih_l0[:, : emb.size(-1)], r0.bias_ih_l0 + r0.bias_hh_l0)


def loop_weights(w: Optional[Weights], device_type: str) -> Optional[Weights]:
    """``step_weights`` for the teacher-forced loop: in training tapped, their steps' gradients summed in one matmul
    per batch, and under autocast cast once, not at every step (without the tap a cast weight would sum its steps'
    gradients in bf16)."""
    if w is None:
        return w
    if torch.is_autocast_enabled(device_type):
        w = [(W.to(torch.get_autocast_dtype(device_type)), b) for W, b in w]
    return [(tap(W), b) for W, b in w] if torch.is_grad_enabled() else w


Matmul = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (bias, x, W) -> bias + x Wᵀ


def cell(x: torch.Tensor, feed: Optional[torch.Tensor], state, w: Weights, matmul: Matmul,
         dropout: nn.Module) -> tuple[torch.Tensor, tuple[list, list]]:
    """One step of every layer: x (batch, 4H) layer 0's projected input, feed h̃_{t-1} (batch, 1, hidden) or None
    without input feeding, state (h, c) indexed by layer; ``dropout`` between layers. The top h (batch, 1, hidden)
    and the per-layer (h, c) lists."""
    h0, c0 = state
    hs, cs = [], []
    inp = feed.squeeze(1) if feed is not None else None  # (batch, hidden)
    for layer, (W, b) in enumerate(w):
        rec = h0[layer] if inp is None else torch.cat([inp, h0[layer]], -1)  # (batch, H or 2H)
        gates = matmul(x if layer == 0 else b, rec, W)  # (batch, 4H)
        hl, c = pointwise.lstm(gates, c0[layer])  # σ(o)·tanh(c), σ(f)·c_{t-1} + σ(i)·tanh(g)
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
    def get(self, decoder: Decoder,
            bf16_output: bool = False) -> tuple[Optional[Weights], Optional[torch.Tensor], Optional[nn.Module]]:
        key = tuple(p.data_ptr() for p in decoder.parameters())
        if self.key != key:
            w, table = step_weights(decoder.rnn, decoder.embed.embedding_dim, decoder.input_feeding), None
            if w is not None and decoder.embed.num_embeddings * w[0][0].size(0) <= TABLE_MAX:
                with torch.autocast(decoder.embed.weight.device.type, enabled=False):  # fp32 under bf16 decoding too
                    table = project_inputs(decoder.rnn, decoder.embed.weight, w)  # (vocab, 4H)
            self.key, self.w, self.table, self.out_bf16 = key, w, table, None
        if bf16_output and self.out_bf16 is None:
            self.out_bf16 = copy.deepcopy(decoder.out).bfloat16()  # nn.Linear, or nmt.tied.TiedOutput
        return self.w, self.table, self.out_bf16 if bf16_output else None
