"""The sequence-to-sequence model: encode, decode, logits. ``nmt.build.build_model`` wires it from config and plugs in
the engine (the plain decoder, or the fast one of nmt/engine/)."""

from __future__ import annotations

import contextlib
from typing import Optional

import torch
from torch import nn

from nmt.decoder import Decoder, Source, State
from nmt.encoder import Encoder, HostLens


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
        return self.decoder.source(memory, mask, src_lens.float()), self._bridge(final)

    def _bridge(self, final: State) -> State:
        """Encoder final states -> decoder initial states (layer by layer, or the top layer repeated);
        encoder and decoder share ``model.rnn_type``, so an LSTM's (h, c) pair maps to a pair."""
        layers = len(self.decoder.rnn)

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
