"""Luong decoder: stacked RNN, attention, attentional state h̃_t = tanh(W_c [c_t; h_t]).

With input feeding (the paper's default) h̃_{t-1} joins the input at step t, so the decoder runs
step by step; without it the RNN runs over the whole target in one call (the fast path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from nmt.attention import LuongAttention
from nmt.encoder import RNNS, Dropout
from nmt.ops import PLAIN, Ops
from nmt.vocab import PAD

State = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]  # (layers, batch, hidden) [h, c]
TABLE_MAX = 1 << 24  # elements of the search's embedding table (64 MB in fp32): bench-small's is 4.1 M


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
        self._search_cache: Optional[list] = None  # [parameter versions, step_weights(), embedding table, bf16 W_s]

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
        w = self.step_weights()
        xs = self._project_inputs(emb, w)  # (batch, tgt_len, gates)
        w = self._loop_weights(w)
        # unbind, not x[:, t]: the backward of T selects would write T zero-filled copies of x
        # (O(T²) memory traffic), the backward of one unbind stacks the T gradients once
        xs = xs.unbind(1)  # tgt_len × (batch, gates)
        feed = emb.new_zeros(emb.size(0), 1, self.hidden)  # h̃_0
        if w is not None:  # per-layer states through the loop: selecting a layer of a stacked
            state = (state[0].unbind(0), state[1].unbind(0))  # state would cost a zero-filled copy in backward
        outs, weights, centres = [], [], []
        for t in range(T):
            feed, state, a, p = self._step(xs[t], feed, state, src, positions[t : t + 1], w)
            outs.append(feed)
            if keep_attention:
                weights.append(a)
                centres.append(p)
        if not keep_attention:
            return torch.cat(outs, 1), None, None
        p_all = torch.cat(centres, 1) if centres[0] is not None else None
        return torch.cat(outs, 1), torch.cat(weights, 1), p_all

    def step(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor,
             weights: Optional[list] = None, table: Optional[torch.Tensor] = None, out: Optional[tuple] = None
             ) -> tuple[torch.Tensor, torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """One search step from y_prev (batch,), feed h̃_{t-1} (batch, 1, hidden), position (1,) t and ``step_weights()``
        (``table``, ``out``: see ``search_weights``, in eval mode): log-probabilities (batch, vocab), h̃_t (batch, 1,
        hidden), the state, weights (batch, 1, src_len), p_t or None."""
        w = self.step_weights() if weights is None else weights
        if table is not None:
            x = table.index_select(0, y_prev)  # (batch, 4H)
        else:
            x = self._project_inputs(self.dropout(self.embed(y_prev)), w)  # (batch, gates)
        feed, state, a, p = self._step(x, feed, state, src, position, w)
        if w is not None:
            state = (torch.stack(state[0]), torch.stack(state[1]))
        logits = self.out(feed) if out is None else nn.functional.linear(feed.to(out[0].dtype), *out)
        logp = torch.log_softmax(logits.squeeze(1).float(), dim=-1)  # (batch, vocab)
        return logp, feed, state, a, p

    # The LSTM's cell written out with the nn.LSTM's own parameters (in search also without input feeding:
    # an nn.LSTM call per step and layer costs 3-4x an addmm): layer 0's embedding projection is one matmul
    # over all steps (a table lookup in search), each layer's step one matmul over [input; h].
    def step_weights(self) -> Optional[list[tuple[torch.Tensor, Optional[torch.Tensor]]]]:
        """The per-layer [input; h] weight matrices and biases of an LSTM decoder (None for GRU and RNN)."""
        if self.rnn.mode != "LSTM":
            return None
        r, E = self.rnn, self.embed.embedding_dim
        first = torch.cat([r.weight_ih_l0[:, E:], r.weight_hh_l0], 1) if self.input_feeding else r.weight_hh_l0
        w = [(first, None)]  # (4H, 2H) over [feed; h], or (4H, H) over h without input feeding
        for l in range(1, r.num_layers):
            W = torch.cat([getattr(r, f"weight_ih_l{l}"), getattr(r, f"weight_hh_l{l}")], 1)  # (4H, 2H)
            w.append((W, getattr(r, f"bias_ih_l{l}") + getattr(r, f"bias_hh_l{l}")))
        return w

    def train(self, mode: bool = True) -> Decoder:
        if mode:
            self._search_cache = None
        return super().train(mode)

    @torch.no_grad()
    def search_weights(self, bf16_output: bool = False) -> tuple[Optional[list], Optional[torch.Tensor], Optional[tuple]]:
        """``step_weights()``, the embedding table through layer 0's input projection of the written-out LSTM
        (vocab, 4H; eval: no dropout; none past TABLE_MAX elements) and with ``bf16_output`` W_s and its bias in
        bf16. Cached until the model goes back to training (fused optimizer steps leave the parameters' version
        counters alone) or a parameter is replaced or written in place (a load)."""
        key = tuple((p.data_ptr(), p._version) for p in self.parameters())  # _version: torch's in-place write count
        if self._search_cache is None or self._search_cache[0] != key:
            w, table = self.step_weights(), None
            if w is not None and self.embed.num_embeddings * w[0][0].size(0) <= TABLE_MAX:
                with torch.autocast(self.embed.weight.device.type, enabled=False):  # fp32 under bf16 decoding too
                    table = self._project_inputs(self.embed.weight, w)  # (vocab, 4H)
            self._search_cache = [key, w, table, None]
        if bf16_output and self._search_cache[3] is None:
            self._search_cache[3] = (self.out.weight.bfloat16(), self.out.bias.bfloat16())
        return self._search_cache[1], self._search_cache[2], self._search_cache[3] if bf16_output else None

    def _loop_weights(self, w: Optional[list]) -> Optional[list]:
        """``step_weights()`` for the teacher-forced loop: in training tapped, their steps' gradients summed in one
        matmul per batch (nmt/ops.py), and under autocast cast once, not at every step (without the tap a
        cast weight would sum its steps' gradients in bf16)."""
        defer = torch.is_grad_enabled() and self.ops.defers
        if w is None or (torch.is_grad_enabled() and not defer):
            return w
        device = self.embed.weight.device.type
        if torch.is_autocast_enabled(device):
            w = [(W.to(torch.get_autocast_dtype(device)), b) for W, b in w]
        return [(self.ops.tap(W), b) for W, b in w] if defer else w

    def _project_inputs(self, emb: torch.Tensor, w) -> torch.Tensor:
        """Layer 0's input projection of the embeddings (LSTM); the embeddings themselves otherwise."""
        if w is None:
            return emb
        r, E = self.rnn, emb.size(-1)
        return nn.functional.linear(emb, r.weight_ih_l0[:, :E], r.bias_ih_l0 + r.bias_hh_l0)  # (..., 4H)

    def _step(self, x: torch.Tensor, feed: torch.Tensor, state, src: Source, position: torch.Tensor, w):
        """x: (batch, 4H) projected embedding (LSTM) or (batch, emb) embedding; state: the nn.RNN's, or for the
        written-out LSTM (w given) (h, c) indexed by layer: stacked, or per-layer sequences of (batch, hidden)."""
        if w is None:
            x = torch.cat([x.unsqueeze(1), feed], -1) if self.input_feeding else x.unsqueeze(1)
            h, state = self.rnn(x, state)  # (batch, 1, hidden)
        else:
            h0, c0 = state
            hs, cs = [], []
            inp = feed.squeeze(1) if self.input_feeding else None  # (batch, hidden)
            for l, (W, b) in enumerate(w):
                rec = h0[l] if inp is None else torch.cat([inp, h0[l]], -1)  # (batch, H or 2H)
                gates = self.ops.addmm(x if l == 0 else b, rec, W)  # (batch, 4H)
                i, f, g, o = gates.chunk(4, -1)
                c = torch.sigmoid(f) * c0[l] + torch.sigmoid(i) * torch.tanh(g)
                hl = torch.sigmoid(o) * torch.tanh(c)
                hs.append(hl)
                cs.append(c)
                inp = self.rnn_dropout(hl) if l + 1 < len(w) else hl
            state = (hs, cs)
            h = inp.unsqueeze(1)  # (batch, 1, hidden)
        att, a, p = self._attend(h, src, position)
        return att, state, a, p

    def _attend(self, h: torch.Tensor, src: Source, positions: torch.Tensor):
        c, a, p = self.attention(h, src.keys, src.memory, src.mask, src.lens, positions)
        att = self.dropout(torch.tanh(self.W_c(torch.cat([c, h], -1))))  # (batch, T, hidden) h̃_t
        return att, a, p
