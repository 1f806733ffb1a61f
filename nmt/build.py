"""The model wired from its config, with the engine plugged in: the paper's plain modules or the fast engine.

The paper's files (encoder, attention, decoder, model) know nothing of the engine; this is the one place that
chooses. Both engines have the same parameters, so a checkpoint trained with either decodes with the other.
"""

from __future__ import annotations

from torch import nn

from nmt.attention import GATHER_ABOVE, LuongAttention
from nmt.config import ConfigError, ModelConfig, validate_model
from nmt.decoder import Decoder
from nmt.encoder import Encoder
from nmt.engine.attention import FastAttention
from nmt.engine.decoder import FastDecoder
from nmt.model import Seq2Seq
from nmt.tied import TiedOutput

ENGINES = ("fast", "plain")


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, engine: str = "fast", compile_step: bool = False,
                gather_above: float = GATHER_ABOVE) -> Seq2Seq:
    """Plain wiring from the config; parameters start uniform in ±init_range (the paper: 0.1). ``engine``: fast (the
    default: nmt/engine/) or plain (nmt/decoder.py as the paper writes it); ``compile_step``: the fast engine's step
    through torch.compile. ``gather_above``: local modes gather the window beyond this many windows of source."""
    validate_model(cfg)
    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    if compile_step and engine != "fast":
        raise ConfigError("trainer.compile compiles the fast engine's step: use engine fast")
    a, fast = cfg.attention, engine == "fast"
    attention = (FastAttention if fast else LuongAttention)(a.score, a.mode, cfg.hidden_size, a.window, a.heads,
                                                            a.max_len, gather_above)
    encoder = Encoder(src_vocab, cfg.emb_size, cfg.hidden_size, cfg.encoder_layers, cfg.bidirectional, cfg.rnn_type, cfg.dropout)
    args = (tgt_vocab, cfg.emb_size, cfg.hidden_size, cfg.decoder_layers, cfg.rnn_type, cfg.dropout, cfg.input_feeding,
            attention)
    decoder = FastDecoder(*args, compile_step=compile_step) if fast else Decoder(*args)
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
