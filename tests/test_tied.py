"""model.tie_embeddings (nmt/tied.py): W_s is the target embedding matrix (decoder), and with one vocabulary the
source's too (all); the model trains, saves, reloads and decodes in every precision and through ONNX."""

from __future__ import annotations

import pytest
import torch
from helpers import digits_cfg, export_cfg
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.config import ConfigError, TrainConfig
from nmt.config_check import validate
from nmt.int8 import int8_model
from nmt.search import beam_search
from nmt.tied import TiedOutput
from nmt.train import train


def params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_the_output_layer_is_the_embedding_matrix(make_model):
    plain, tied = make_model(23, 19), make_model(23, 19, tie_embeddings="decoder")
    assert isinstance(tied.decoder.out, TiedOutput) and tied.decoder.out.proj is None  # emb == hidden: no P
    assert tied.decoder.out.embed.weight is tied.decoder.embed.weight
    assert params(plain) - params(tied) == 19 * 16  # one (vocab, hidden) matrix fewer
    other = make_model(23, 19, tie_embeddings="decoder", emb_size=8)
    assert other.decoder.out.proj.weight.shape == (8, 16)  # P: hidden -> emb
    assert other.encoder.embed is not other.decoder.embed


def test_the_embeddings_learn_from_the_output_layer(make_model, random_sources):
    """A target piece that never enters the decoder still gets an embedding gradient: the softmax's."""
    model = make_model(23, 19, tie_embeddings="decoder", train=True)
    src = random_sources(4, 2, 6, 23)
    batch = make_batch(src, [[3, 4, 5]] * 4, range(4))
    logits, _ = model(batch.src, batch.src_lens, tuple(batch.host_lens.tolist()), batch.tgt_in)
    logits.logsumexp(-1).mean().backward()
    assert float(model.decoder.embed.weight.grad[17].abs().sum()) > 0  # 17: in no input


def test_all_shares_one_matrix_and_needs_one_vocabulary(make_model):
    model = make_model(19, 19, tie_embeddings="all")
    assert model.encoder.embed is model.decoder.embed
    with pytest.raises(ConfigError, match="one vocabulary"):
        make_model(23, 19, tie_embeddings="all")
    cfg = OmegaConf.structured(TrainConfig)
    cfg.model.tie_embeddings = "all"
    with pytest.raises(ConfigError, match="tokenizer.joint=true"):
        validate(cfg)
    cfg.model.tie_embeddings = "both"
    with pytest.raises(ConfigError, match="tie_embeddings"):
        validate(cfg)


def test_a_tied_model_decodes_in_bf16_output_and_int8_and_exports(make_model, random_sources, hsk_tokenizer, tmp_path):
    from nmt.export_onnx import export_onnx
    from nmt.onnx_runtime import OnnxTranslator

    model = make_model(40, 30, tie_embeddings="decoder", emb_size=8, mode="local_p", window=3)
    with torch.no_grad():
        model.decoder.embed.weight.mul_(30)  # peaked outputs: no near-ties between hypotheses
    sources = random_sources(6, 2, 12, 40, seed=2)
    batch = make_batch(sources, None, range(6))
    ref = beam_search(model, batch, beam=3)
    bf16 = beam_search(model, batch, beam=3, bf16_output=True)
    assert all(abs(a - b) < 0.5 for a, b in zip(ref.scores, bf16.scores))
    cfg = OmegaConf.structured(TrainConfig).model
    cfg.emb_size, cfg.hidden_size, cfg.encoder_layers, cfg.decoder_layers, cfg.dropout = 8, 16, 1, 1, 0.0
    cfg.tie_embeddings, cfg.attention.mode, cfg.attention.window = "decoder", "local_p", 3
    q = beam_search(int8_model(model, cfg), batch, beam=3)
    assert all(abs(a - b) < 0.5 for a, b in zip(ref.scores, q.scores))
    export_onnx(model, hsk_tokenizer, export_cfg("local_p", 3), tmp_path)
    assert [t for t, _ in OnnxTranslator(tmp_path).greedy(sources)] == beam_search(model, batch, beam=1).tokens


def test_a_tied_run_trains_saves_and_reloads(digits_dir, tmp_path):
    from nmt import Translator

    cfg = digits_cfg(digits_dir, max_steps=30, valid_every=30, test_beam=0)
    cfg.model.tie_embeddings = "decoder"
    metrics = train(cfg, tmp_path / "run")
    assert metrics["steps"] == 30
    t = Translator.load(tmp_path / "run", device="cpu")
    assert t.models[0].decoder.out.embed.weight is t.models[0].decoder.embed.weight  # still one matrix after loading
    assert len(t.translate(["1 2 3"], beam=2)) == 1
