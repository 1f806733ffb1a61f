"""The fast engine's decoder: the paper's ``Decoder`` (same parameters, same values within fp32 rounding) with the
whole teacher-forced loop and search step replaced.

- An LSTM's step is written out (nmt/engine/cell.py): one matmul a layer over [input; h], layer 0's projection of
  the embeddings once for all steps (a cached table lookup in search), the gates in one sigmoid (pointwise.py).
- In training the batch's keys and memory and the step's weights are tapped: their per-step gradients are summed in
  one matmul per batch (deferred.py); under autocast the step's weights are cast once per batch.
- In search the step's weights, the embedding table and a bf16 copy of W_s (``bf16_output``) are computed once until
  the weights change (``SearchWeights``); beam search's hypotheses share their sentence's source (attention.py).
- int8 (nmt/int8.py ``quantize``): the written-out step's matmuls by int8 copies of their weights.
- ``compile_step``: the loop's step through ``torch.compile`` (compiled.py).
"""

from __future__ import annotations

import weakref
from typing import Optional

import torch

from nmt.decoder import Attended, Decoder, Source, State, collect
from nmt.engine import deferred, pointwise
from nmt.engine.cell import SearchWeights, Weights, cell, loop_weights, project_inputs, step_weights
from nmt.engine.compiled import CompiledStep
from nmt.engine.int8 import Int8Linear


class FastDecoder(Decoder):
    shares_source = True  # beam search keeps one source row per sentence (nmt/engine/attention.py)

    def __init__(self, *args, compile_step: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.search_cache = SearchWeights()  # what search steps read, computed once
        self.register_load_state_dict_post_hook(lambda module, keys: module.search_cache.clear())
        self.int8: Optional[dict[int, Int8Linear]] = None  # id(weight) -> its int8 copy, once quantized (nmt/int8.py)
        self.loop_step = CompiledStep(self._step) if compile_step else self._step

    def source(self, memory: torch.Tensor, mask: torch.Tensor, lens: torch.Tensor) -> Source:
        if self._searching():  # once a batch, not at every step: the cached weights checked against the parameters
            self.search_cache.get(self)
        keys = self.attention.keys(memory)
        if torch.is_grad_enabled():  # used at every step: their gradients summed once per batch
            keys, memory = (deferred.tap(memory),) * 2 if keys is memory else (deferred.tap(keys), deferred.tap(memory))
        return Source(memory, keys, mask, lens)

    def forward(self, tgt_in: torch.Tensor, state: State, src: Source, keep_attention: bool = False) -> Attended:
        if not self.input_feeding:
            return super().forward(tgt_in, state, src, keep_attention)
        emb = self.dropout(self.embed(tgt_in))  # (batch, tgt_len, emb)
        positions = torch.arange(tgt_in.size(1), device=tgt_in.device, dtype=torch.float)  # (tgt_len,)
        w = self.step_weights()  # None for GRU and RNN
        xs = project_inputs(self.rnn, emb, w)  # (batch, tgt_len, gates)
        w = loop_weights(w, self.embed.weight.device.type)
        # unbind, not x[:, t]: the backward of T selects would write T zero-filled copies of x
        # (O(T²) memory traffic), the backward of one unbind stacks the T gradients once
        xs = xs.unbind(1)  # tgt_len × (batch, gates)
        feed = emb.new_zeros(emb.size(0), 1, self.hidden)  # h̃_0
        if w is not None:  # per-layer states through the loop: selecting a layer of a stacked
            state = (state[0].unbind(0), state[1].unbind(0))  # state would cost a zero-filled copy in backward
        outs, weights, centres = [], [], []
        for t in range(len(xs)):
            feed, state, a, p = self.loop_step(xs[t], feed, state, src, positions[t : t + 1], w)
            outs.append(feed)
            weights.append(a)
            centres.append(p)
        return collect(outs, weights, centres, keep_attention)

    def advance(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor
                ) -> tuple[torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """``Decoder.advance``; rows may be k hypotheses a sentence of ``src`` (beam search's layout)."""
        cache = self.search_cache
        if not self._searching():  # training, or an export, which traces the weights' maths
            w, table = self.step_weights(), None
        else:  # checked once a batch in ``source``; built here if cleared since
            w, table, _ = cache.get(self) if cache.key is None else (cache.w, cache.table, None)
        if table is not None:
            x = table.index_select(0, y_prev)  # (batch, 4H)
        else:
            x = project_inputs(self.rnn, self.dropout(self.embed(y_prev)), w)  # (batch, gates)
        feed, state, a, p = self.loop_step(x, feed, state, src, position, w)
        if w is not None:
            state = (torch.stack(state[0]), torch.stack(state[1]))
        return feed, state, a, p

    def log_probs(self, feed: torch.Tensor, bf16_output: bool = False) -> torch.Tensor:
        """``Decoder.log_probs``, with W_s's bf16 copy made once (in eval mode) for ``bf16_output``."""
        out = None
        if bf16_output and not self.training:
            cached = self.search_cache
            out = cached.out_bf16 if cached.key is not None and cached.out_bf16 is not None else cached.get(self, True)[2]
        logits = self.out(feed) if out is None else out(feed.to(torch.bfloat16))
        return torch.log_softmax(logits.squeeze(1).float(), dim=-1)

    def attend(self, h: torch.Tensor, src: Source, positions: torch.Tensor) -> Attended:
        c, a, p = self.attention(h, src.keys, src.memory, src.mask, src.lens, positions)
        return self.dropout(pointwise.tanh(self.W_c(torch.cat([c, h], -1)))), a, p

    def _searching(self) -> bool:
        """Whether steps read the search's cached weights: in eval mode, outside an ONNX export."""
        return not self.training and not torch.onnx.is_in_onnx_export()

    def step_weights(self) -> Optional[Weights]:
        """The per-layer [input; h] weights of the written-out LSTM step (None for GRU and RNN)."""
        return step_weights(self.rnn, self.embed.embedding_dim, self.input_feeding)

    def matmul(self, bias: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """bias + x wᵀ, one layer of the written-out step: deferred in training, int8 once quantized."""
        if self.int8 is None:
            return deferred.addmm(bias, x, w)
        q = self.int8.get(id(w))
        if q is None:  # packed the first time the weight is seen (the search's weights are cached: once per model)
            q = self.int8[id(w)] = Int8Linear(w)
            weakref.finalize(w, self.int8.pop, id(w), None)
        return q(x).add_(bias)  # bias: (4H,), or layer 0's projected input (batch, 4H); q(x) is a fresh tensor

    def train(self, mode: bool = True) -> FastDecoder:
        if mode:
            self.search_cache.clear()
        return super().train(mode)

    def _step(self, x: torch.Tensor, feed: torch.Tensor, state, src: Source, position: torch.Tensor,
              w: Optional[Weights]):
        """x: (batch, 4H) projected embedding (LSTM) or (batch, emb) embedding; state: stacked, or for the written-out
        LSTM (w given) (h, c) indexed by layer: stacked, or per-layer sequences of (batch, hidden)."""
        if w is None:  # GRU and RNN: torch's own, a layer at a time
            x = torch.cat([x.unsqueeze(1), feed], -1) if self.input_feeding else x.unsqueeze(1)
            h, state = self.recur(x, state)  # (batch, 1, hidden)
        else:
            h, state = cell(x, feed if self.input_feeding else None, state, w, self.matmul, self.dropout)
        att, a, p = self.attend(h, src, position)
        return att, state, a, p
