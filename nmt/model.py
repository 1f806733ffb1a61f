"""The sequence-to-sequence model: encode, decode, logits; ``build_model`` wires it from config."""

from __future__ import annotations

import contextlib
from typing import Optional

import torch
from torch import nn

from nmt.attention import GATHER_ABOVE, LuongAttention
from nmt.config import ConfigError, ModelConfig, validate_model
from nmt.decoder import Decoder, Source, State
from nmt.encoder import Encoder, HostLens
from nmt.ops import Ops, fast_ops
from nmt.tied import TiedOutput


class Seq2Seq(nn.Module):
    def __init__(self, encoder: Encoder, decoder: Decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor, host_lens: HostLens) -> tuple[Source, State]:
        """Source states, attention keys and mask (once per batch), and the decoder's first state. src: (batch, src_len);
        src_lens: (batch,) on the model's device; host_lens: the same on the CPU, as a tensor or ints (ints pass
        DistributedDataParallel, which moves every tensor)."""
        memory, final = self.encoder(src, host_lens)  # (batch, src_len, hidden)
        mask = torch.arange(src.size(1), device=src.device).unsqueeze(0) < src_lens.unsqueeze(1)
        keys, ops = self.decoder.attention.keys(memory), self.decoder.ops
        # used at every decoder step: marked for the ops (nmt/ops.py; fast ops sum their steps' gradients at once)
        keys, memory = (ops.tap(memory),) * 2 if keys is memory else (ops.tap(keys), ops.tap(memory))
        source = Source(memory, keys, mask, src_lens.float())
        return source, self._bridge(final)

    def _bridge(self, final: State) -> State:
        """Encoder final states -> decoder initial states (layer by layer, or the top layer repeated);
        encoder and decoder share ``model.rnn_type``, so an LSTM's (h, c) pair maps to a pair."""
        layers = self.decoder.rnn.num_layers

        def fit(s: torch.Tensor) -> torch.Tensor:  # (enc_layers, batch, hidden) -> (layers, batch, hidden)
            return (s if s.size(0) == layers else s[-1:].expand(layers, -1, -1)).contiguous()

        return tuple(fit(s) for s in final) if isinstance(final, tuple) else fit(final)  # type: ignore[return-value]

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor, host_lens: HostLens, tgt_in: torch.Tensor,
                keep_attention: bool = False, bf16_output: bool = False) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Teacher-forced logits (batch, tgt_len, vocab) and, if asked, attention weights. ``bf16_output``: W_s
        under bf16 autocast, the rest as the caller runs it (trainer.precision=bf16_output, nmt/precision.py)."""
        source, state = self.encode(src, src_lens, host_lens)
        att, weights, _ = self.decoder(tgt_in, state, source, keep_attention)  # (batch, tgt_len, hidden)
        # nullcontext, not autocast(enabled=False): that would switch off an enclosing autocast
        with torch.autocast(att.device.type, torch.bfloat16) if bf16_output else contextlib.nullcontext():
            return self.decoder.out(att), weights

    @torch.no_grad()
    def align(self, src: torch.Tensor, src_lens: torch.Tensor, host_lens: torch.Tensor,
              tgt_in: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Attention weights (batch, tgt_len, src_len) and local centres p_t (batch, tgt_len) or
        None, for a given target (e.g. the model's own translation)."""
        source, state = self.encode(src, src_lens, host_lens)
        _, weights, p = self.decoder(tgt_in, state, source, keep_attention=True)
        return weights, p


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, ops: Optional[Ops] = None,
                gather_above: float = GATHER_ABOVE) -> Seq2Seq:
    """Plain wiring from the config; parameters start uniform in ±init_range (the paper: 0.1). ``ops``: the
    operations of the decoder's loop (nmt/ops.py), by default the fast ones; ``Ops()`` is plain autograd.
    ``gather_above``: local modes gather the window beyond this many windows of source (0: always)."""
    validate_model(cfg)
    a, ops = cfg.attention, ops or fast_ops()
    attention = LuongAttention(a.score, a.mode, cfg.hidden_size, a.window, a.heads, a.max_len, ops, gather_above)
    encoder = Encoder(src_vocab, cfg.emb_size, cfg.hidden_size, cfg.encoder_layers, cfg.bidirectional, cfg.rnn_type, cfg.dropout)
    decoder = Decoder(tgt_vocab, cfg.emb_size, cfg.hidden_size, cfg.decoder_layers, cfg.rnn_type, cfg.dropout,
                      cfg.input_feeding, attention, ops)
    if cfg.tie_embeddings != "none":  # W_s = E, the target embeddings (nmt/tied.py)
        decoder.out = TiedOutput(decoder.embed, cfg.hidden_size)
    if cfg.tie_embeddings == "all":  # one embedding matrix for both sides: one vocabulary
        if src_vocab != tgt_vocab:
            raise ConfigError(f"model.tie_embeddings=all needs one vocabulary (tokenizer.joint=true), not {src_vocab} "
                              f"source and {tgt_vocab} target pieces")
        encoder.embed = decoder.embed
    model = Seq2Seq(encoder, decoder)
    for p in model.parameters():
        nn.init.uniform_(p, -cfg.init_range, cfg.init_range)
    return model
