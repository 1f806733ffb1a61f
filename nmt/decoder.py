"""Luong decoder: stacked RNN, attention, attentional state h̃_t = tanh(W_c [c_t; h_t]), p(y_t) = softmax(W_s h̃_t).

With input feeding (the paper's default) h̃_{t-1} joins the input at step t, so the decoder runs
step by step; without it the RNN runs over the whole target in one call per layer. Plain PyTorch:
torch's own LSTM/GRU, one a layer with this module's dropout between them, so every dropout mask
comes from torch's random state, which a checkpoint holds (cuDNN's inter-layer dropout would not).
The fast engine (nmt/engine/) replaces the whole loop and step, with the same parameters.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from nmt.attention import LuongAttention
from nmt.encoder import RNNS, Dropout, stacked_keys
from nmt.vocab import PAD

State = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]  # (layers, batch, hidden) [h, c]
Attended = tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]  # h̃, a, p


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


def layer_state(state: State, layer: int) -> State:
    """Layer ``layer``'s (1, batch, hidden) state, or its (h, c) pair."""
    if isinstance(state, tuple):
        return tuple(s[layer : layer + 1] for s in state)  # type: ignore[return-value]
    return state[layer : layer + 1]


def stack_states(states: list) -> State:
    """Per-layer states (each (1, batch, hidden) or a pair) -> (layers, batch, hidden) or a pair."""
    if isinstance(states[0], tuple):
        return tuple(torch.cat(s) for s in zip(*states))  # type: ignore[return-value]
    return torch.cat(states)


def collect(outs: list, weights: list, centres: list, keep_attention: bool) -> Attended:
    """A step loop's h̃_t (batch, 1, hidden) each, joined to (batch, tgt_len, hidden), with the attention weights and
    centres if kept."""
    if not keep_attention:
        return torch.cat(outs, 1), None, None
    return torch.cat(outs, 1), torch.cat(weights, 1), torch.cat(centres, 1) if centres[0] is not None else None


class Decoder(nn.Module):
    shares_source = False  # a search gives it one source row per hypothesis (nmt/stepper.py)

    def __init__(self, vocab: int, emb: int, hidden: int, layers: int, rnn_type: str, dropout: float, input_feeding: bool,
                 attention: LuongAttention):
        super().__init__()
        self.hidden, self.input_feeding = hidden, input_feeding
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD)
        first = emb + (hidden if input_feeding else 0)
        self.rnn = nn.ModuleList(RNNS[rnn_type](first if k == 0 else hidden, hidden, 1, batch_first=True)
                                 for k in range(layers))
        self.attention = attention
        self.W_c = nn.Linear(2 * hidden, hidden, bias=False)
        self.dropout = Dropout(dropout)  # on the embeddings, between the layers, on h̃
        self.out = nn.Linear(hidden, vocab)  # W_s
        self.register_load_state_dict_pre_hook(stacked_keys)  # checkpoints of one multi-layer nn.LSTM load

    def source(self, memory: torch.Tensor, mask: torch.Tensor, lens: torch.Tensor) -> Source:
        """The encoder's states with the step-independent half of the score, computed once per batch."""
        return Source(memory, self.attention.keys(memory), mask, lens)

    def forward(self, tgt_in: torch.Tensor, state: State, src: Source, keep_attention: bool = False) -> Attended:
        """Teacher-forced pass over tgt_in (batch, tgt_len): h̃ (batch, tgt_len, hidden) and, if asked, the
        attention weights (batch, tgt_len, src_len) and local centres p_t (batch, tgt_len) or None."""
        emb = self.dropout(self.embed(tgt_in))  # (batch, tgt_len, emb)
        positions = torch.arange(tgt_in.size(1), device=tgt_in.device, dtype=torch.float)  # (tgt_len,)
        if not self.input_feeding:
            h, _ = self.recur(emb, state)  # (batch, tgt_len, hidden)
            att, a, p = self.attend(h, src, positions)
            return (att, a, p) if keep_attention else (att, None, None)
        feed = emb.new_zeros(emb.size(0), 1, self.hidden)  # h̃_0
        outs, weights, centres = [], [], []
        for t in range(tgt_in.size(1)):
            h, state = self.recur(torch.cat([emb[:, t : t + 1], feed], -1), state)  # [y_{t-1}; h̃_{t-1}]
            feed, a, p = self.attend(h, src, positions[t : t + 1])
            outs.append(feed)
            weights.append(a)
            centres.append(p)
        return collect(outs, weights, centres, keep_attention)

    def step(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor,
             bf16_output: bool = False) -> tuple[torch.Tensor, torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """One search step: log-probabilities (batch, vocab) and ``advance``'s h̃_t, state, weights and p_t."""
        feed, state, a, p = self.advance(y_prev, feed, state, src, position)
        return self.log_probs(feed, bf16_output), feed, state, a, p

    def advance(self, y_prev: torch.Tensor, feed: torch.Tensor, state: State, src: Source, position: torch.Tensor
                ) -> tuple[torch.Tensor, State, torch.Tensor, Optional[torch.Tensor]]:
        """One step from y_prev (batch,), feed h̃_{t-1} (batch, 1, hidden) and position (1,) t: h̃_t (batch, 1,
        hidden), the state, weights (batch, 1, src_len) and p_t (batch, 1) or None. One source row per row."""
        x = self.dropout(self.embed(y_prev)).unsqueeze(1)  # (batch, 1, emb)
        h, state = self.recur(torch.cat([x, feed], -1) if self.input_feeding else x, state)
        feed, a, p = self.attend(h, src, position)
        return feed, state, a, p

    def log_probs(self, feed: torch.Tensor, bf16_output: bool = False) -> torch.Tensor:
        """log softmax(W_s h̃_t) (batch, vocab) from h̃_t (batch, 1, hidden); ``bf16_output``: W_s in bf16."""
        with torch.autocast(feed.device.type, torch.bfloat16) if bf16_output else contextlib.nullcontext():
            logits = self.out(feed)
        return torch.log_softmax(logits.squeeze(1).float(), dim=-1)

    def recur(self, x: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """The stacked RNN over x (batch, T, input) from ``state``: the top layer's h (batch, T, hidden), the last state."""
        finals = []
        for k, rnn in enumerate(self.rnn):
            x, final = rnn(self.dropout(x) if k else x, layer_state(state, k))
            finals.append(final)
        return x, stack_states(finals)

    def attend(self, h: torch.Tensor, src: Source, positions: torch.Tensor) -> Attended:
        """Attention from h_t (batch, T, hidden), then h̃_t = tanh(W_c [c_t; h_t]) (dropped out in training)."""
        c, a, p = self.attention(h, src.keys, src.memory, src.mask, src.lens, positions)
        return self.dropout(torch.tanh(self.W_c(torch.cat([c, h], -1)))), a, p
