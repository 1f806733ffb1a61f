"""Luong decoder: stacked RNN, attention, attentional state h̃_t = tanh(W_c [c_t; h_t]).

With input feeding (the paper's default) h̃_{t-1} joins the input at step t, so the decoder runs
step by step; without it the RNN runs over the whole target in one call. An LSTM's step is written
out with its own parameters (nmt/lstm_step.py), the loop's matmuls through ``ops`` (nmt/ops.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from nmt import lstm_step
from nmt.attention import LuongAttention
from nmt.encoder import RNNS, Dropout
from nmt.ops import PLAIN, Ops
from nmt.vocab import PAD

State = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]  # (layers, batch, hidden) [h, c]


@dataclass
class Source:
    """Everything the decoder needs from the encoder, computed once per batch."""

    memory: torch.Tensor  # (batch, src_len, hidden) h̄_s
    keys: torch.Tensor  # (batch, src_len, hidden) step-independent half of the score
    mask: torch.Tensor  # (batch, src_len) bool, True at real tokens
    lens: torch.Tensor  # (batch,) float source lengths

    def select(self, index: torch.Tensor) -> Source:
        """Rows ``index`` (e.g. repeated for a beam, or the sentences still decoding)."""
        return Source(*(t.index_select(0, index) for t in (self.memory, self.keys, self.mask, self.lens)))


def select_state(state: State, index: torch.Tensor) -> State:
    if isinstance(state, tuple):
        return tuple(s.index_select(1, index) for s in state)  # type: ignore[return-value]
    return state.index_select(1, index)


class Decoder(nn.Module):
    def __init__(self, vocab: int, emb: int, hidden: int, layers: int, rnn_type: str, dropout: float, input_feeding: bool,
                 attention: LuongAttention, ops: Ops = PLAIN):
        super().__init__()
        self.hidden, self.input_feeding, self.ops = hidden, input_feeding, ops  # ops: the step's addmm (nmt/ops.py)
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.rnn = RNNS[rnn_type](emb + (hidden if input_feeding else 0), hidden, layers, batch_first=True,
                                  dropout=dropout if layers > 1 else 0.0)
        self.attention = attention
        self.W_c = nn.Linear(2 * hidden, hidden, bias=False)
        self.dropout = Dropout(dropout)
        self.rnn_dropout = Dropout(dropout if layers > 1 else 0.0)  # between stacked layers
        self.out = nn.Linear(hidden, vocab)  # W_s
        self.search_cache = lstm_step.SearchWeights()  # what search steps read, computed once (nmt/lstm_step.py)
        self.register_load_state_dict_post_hook(lambda module, keys: module.search_cache.clear())
        self.loop_step = ops.loop(self._step)  # _step, or compiled (Ops(compile_step=True), nmt/compiled_step.py)

    def forward(self, tgt_in: torch.Tensor, state: State, src: Source,
                keep_attention: bool = False) -> tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """Teacher-forced pass over tgt_in (batch, tgt_len): h̃ (batch, tgt_len, hidden) and, if asked, the
        attention weights (batch, tgt_len, src_len) and local centres p_t (batch, tgt_len) or None."""
        emb = self.dropout(self.embed(tgt_in))  # (batch, tgt_len, emb)
        T = tgt_in.size(1)
        positions = torch.arange(T, device=tgt_in.device, dtype=torch.float)  # (tgt_len,)
        if not self.input_feeding:
            h, _ = self.rnn(emb, state)  # (batch, tgt_len, hidden)
            att, a, p = self._attend(h, src, positions)
            return (att, a, p) if keep_attention else (att, None, None)
        w = self.step_weights()  # an LSTM's step is written out (nmt/lstm_step.py); None for GRU and RNN
        xs = lstm_step.project_inputs(self.rnn, emb, w)  # (batch, tgt_len, gates)
        w = lstm_step.loop_weights(w, self.ops, self.embed.weight.device.type)
        # unbind, not x[:, t]: the backward of T selects would write T zero-filled copies of x
        # (O(T²) memory traffic), the backward of one unbind stacks the T gradients once
        xs = xs.unbind(1)  # tgt_len × (batch, gates)
        feed = emb.new_zeros(emb.size(0), 1, self.hidden)  # h̃_0
        if w is not None:  # per-layer states through the loop: selecting a layer of a stacked
            state = (state[0].unbind(0), state[1].unbind(0))  # state would cost a zero-filled copy in backward
        outs, weights, centres = [], [], []
        for t in range(T):
            feed, state, a, p = self.loop_step(xs[t], feed, state, src, positions[t : t + 1], w)
            outs.append(feed)
            if keep_attention:
                weights.append(a)
                centres.append(p)
        if not keep_attention:
            return torch.cat(outs, 1), None, None
        p_all = torch.cat(centres, 1) if centres[0] is not None else None
        return torch.cat(outs, 1), torch.cat(weights, 1), p_all

    def step(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor,
             weights: Optional[list] = None, table: Optional[torch.Tensor] = None, out: Optional[nn.Module] = None
             ) -> tuple[torch.Tensor, torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """One search step from y_prev (batch,), feed h̃_{t-1} (batch, 1, hidden), position (1,) t and ``step_weights()``
        (``table``, ``out``: see ``search_weights``, in eval mode): log-probabilities (batch, vocab), h̃_t (batch, 1,
        hidden), the state, weights (batch, 1, src_len), p_t or None."""
        feed, state, a, p = self.advance(y_prev, feed, state, src, position, weights, table)
        return self.log_probs(feed, out), feed, state, a, p

    def advance(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor,
                weights: Optional[list] = None, table: Optional[torch.Tensor] = None
                ) -> tuple[torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """``step`` without the output layer: h̃_t (batch, 1, hidden), the state, weights (batch, 1, src_len), p_t."""
        w = self.step_weights() if weights is None else weights
        if table is not None:
            x = table.index_select(0, y_prev)  # (batch, 4H)
        else:
            x = lstm_step.project_inputs(self.rnn, self.dropout(self.embed(y_prev)), w)  # (batch, gates)
        feed, state, a, p = self.loop_step(x, feed, state, src, position, w)
        if w is not None:
            state = (torch.stack(state[0]), torch.stack(state[1]))
        return feed, state, a, p

    def log_probs(self, feed: torch.Tensor, out: Optional[nn.Module] = None) -> torch.Tensor:
        """log softmax(W_s h̃_t) (batch, vocab) from h̃_t (batch, 1, hidden); ``out``: W_s in bf16 (``search_weights``)."""
        logits = self.out(feed) if out is None else out(feed.to(torch.bfloat16))
        return torch.log_softmax(logits.squeeze(1).float(), dim=-1)

    def step_weights(self) -> Optional[lstm_step.Weights]:
        """The per-layer [input; h] weights of the written-out LSTM step (None for GRU and RNN)."""
        return lstm_step.step_weights(self.rnn, self.embed.embedding_dim, self.input_feeding)

    def search_weights(self, bf16_output: bool = False) -> tuple[Optional[list], Optional[torch.Tensor], Optional[nn.Module]]:
        """``step_weights()``, the embedding table through layer 0's projection and (bf16_output) W_s in bf16,
        computed once for the search steps (nmt/lstm_step.py: SearchWeights)."""
        return self.search_cache.get(self, bf16_output)

    def train(self, mode: bool = True) -> Decoder:
        if mode:
            self.search_cache.clear()
        return super().train(mode)

    def _step(self, x: torch.Tensor, feed: torch.Tensor, state, src: Source, position: torch.Tensor, w):
        """x: (batch, 4H) projected embedding (LSTM) or (batch, emb) embedding; state: the nn.RNN's, or for the
        written-out LSTM (w given) (h, c) indexed by layer: stacked, or per-layer sequences of (batch, hidden)."""
        if w is None:
            x = torch.cat([x.unsqueeze(1), feed], -1) if self.input_feeding else x.unsqueeze(1)
            h, state = self.rnn(x, state)  # (batch, 1, hidden)
        else:
            h, state = lstm_step.cell(x, feed if self.input_feeding else None, state, w, self.ops, self.rnn_dropout)
        att, a, p = self._attend(h, src, position)
        return att, state, a, p

    def _attend(self, h: torch.Tensor, src: Source, positions: torch.Tensor):
        c, a, p = self.attention(h, src.keys, src.memory, src.mask, src.lens, positions)
        att = self.dropout(self.ops.tanh(self.W_c(torch.cat([c, h], -1))))  # (batch, T, hidden) h̃_t
        return att, a, p
