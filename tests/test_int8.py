"""int8 decoding (``precision="int8"``, ``--precision int8``; nmt/int8.py): the quantized matmuls stay within
int8's rounding of fp32 for every score and mode, and every entry point decodes with it."""

from __future__ import annotations

import gc
import math

import pytest
import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.build import build_model
from nmt.checkpoint import save
from nmt.config import to_dict
from nmt.engine.int8 import Int8Linear, full_range, int8_linear
from nmt.int8 import quantize

SENTENCES = ["老师，您好！", "图书馆在学校里边。", "", "我今天很忙，明天再说吧。"]


def close(got: torch.Tensor, ref: torch.Tensor, share: float = 0.05) -> bool:
    """Within ``share`` of the reference's largest magnitude: int8 keeps about 2 significant digits."""
    return float((got - ref).abs().max()) <= share * float(ref.abs().max()) + 1e-4


def test_the_int8_step_multiplies_by_a_weight_packed_once_and_dropped_with_it(make_model):
    decoder = quantize(make_model()).decoder  # the fast engine's written-out step, quantized
    torch.manual_seed(0)
    w, b, x = torch.randn(64, 32), torch.randn(64), torch.randn(8, 32)
    ref = torch.addmm(b, x, w.t())
    assert close(decoder.matmul(b, x, w), ref) and not torch.equal(decoder.matmul(b, x, w), ref)  # int8, not fp32
    assert len(decoder.int8) == 1  # the second call reused the packed weight
    del w
    gc.collect()
    assert decoder.int8 == {}
    assert close(int8_linear(torch.eye(4) * 3, torch.ones(4))(torch.ones(2, 4)), torch.full((2, 4), 4.0))


def test_activations_use_all_8_bits_only_where_int8_sums_cannot_saturate():
    assert full_range(frozenset({"avx2", "avx512_vnni"})) and full_range(frozenset({"amx_int8"}))
    assert full_range(frozenset({"avx2", "avx_vnni"}))
    assert not full_range(frozenset({"avx2", "fma", "avx512f"}))  # vpmaddubsw's 16-bit pair sums: 7 bits
    torch.manual_seed(0)
    w, x = torch.randn(256, 128), torch.randn(16, 128)
    q = int8_linear(w)
    assert isinstance(q, Int8Linear) and q.reduce_range == (not full_range())
    lin = torch.nn.Linear(128, 256)
    lin.weight.data.copy_(w)
    lin.qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    torch_int8 = torch.ao.nn.quantized.dynamic.Linear.from_float(lin)  # quantize_dynamic's module: 7 bits
    ours = int8_linear(w, lin.bias.data)
    ours.reduce_range = True
    assert torch.equal(ours(x), torch_int8(x))  # the same weights, scales and kernels
    for reduce_range in (True, False):  # the module runs the op with the range it was given
        q.reduce_range = reduce_range
        op = torch.ops.quantized.linear_dynamic(x, q.packed, reduce_range=reduce_range)
        assert torch.equal(q(x), op)


@pytest.mark.skipif(not full_range(), reason="this CPU has no VNNI or AMX int8: activations keep 7 bits")
def test_all_8_bits_halve_the_activations_rounding_on_a_vnni_cpu():
    torch.manual_seed(0)
    w, x = torch.randn(512, 256), torch.randn(64, 256)
    ref, q = x @ w.t(), int8_linear(w)
    errors = {}
    for reduce_range in (True, False):
        q.reduce_range = reduce_range
        errors[reduce_range] = float((q(x) - ref).pow(2).mean().sqrt())
    assert errors[False] < 0.75 * errors[True]


@pytest.mark.parametrize("kw", [
    dict(score="general", mode="global"), dict(score="dot", mode="local_m"), dict(score="concat", mode="local_p"),
    dict(score="general", mode="local_p", input_feeding=False), dict(score="scaled_dot", mode="global", heads=2),
    dict(score="general", mode="global", rnn_type="gru"), dict(score="location", mode="global", decoder_layers=2),
])
def test_int8_logits_stay_within_int8_rounding_of_fp32(make_model, random_sources, kw):
    fp32 = make_model(30, 25, seed=3, init_range=0.5, window=2, **kw)
    int8 = quantize(make_model(30, 25, seed=3, init_range=0.5, window=2, **kw))
    assert isinstance(int8.decoder.out, Int8Linear)
    src = random_sources(6, 2, 12, 30, seed=4)
    batch = make_batch(src, [[t % 24 + 1 for t in s] for s in src], range(6))
    args = (batch.src, batch.src_lens, tuple(batch.host_lens.tolist()), batch.tgt_in)
    with torch.no_grad():
        ref, got = fp32(*args)[0], int8(*args)[0]
    assert close(got, ref) and not torch.equal(got, ref)


def test_int8_needs_a_model_built_for_it(make_model, hsk_cfg, hsk_tokenizer):
    from nmt.translator import Translator

    with pytest.raises(ValueError, match="fast engine"):
        quantize(make_model(engine="plain"))
    with pytest.raises(ValueError, match="needs quantized models"):
        Translator(make_model(), hsk_tokenizer, hsk_cfg, precision="int8")


@pytest.fixture(scope="module")
def checkpoint(hsk_cfg, hsk_tokenizer, tmp_path_factory):
    cfg = OmegaConf.merge(hsk_cfg, {"model": {"emb_size": 16, "hidden_size": 16, "encoder_layers": 1, "decoder_layers": 2,
                                              "dropout": 0.0, "attention": {"mode": "local_p", "window": 2}}})
    torch.manual_seed(0)
    model = build_model(cfg.model, hsk_tokenizer.src_vocab_size, hsk_tokenizer.tgt_vocab_size)
    path = tmp_path_factory.mktemp("int8_run") / "best.pt"
    save({"model": model.state_dict(), "config": to_dict(cfg), "tokenizer": hsk_tokenizer.to_state(), "step": 1}, path)
    return path


def test_the_python_api_translates_in_int8_close_to_fp32(checkpoint):
    from nmt import Translator

    fp32, int8 = Translator.load(checkpoint, precision="fp32"), Translator.load(checkpoint, precision="int8")
    assert int8.device.type == "cpu" and int8.precision == "int8"
    a, b = fp32.translate(SENTENCES, beam=3, n_best=2), int8.translate(SENTENCES, beam=3, n_best=2)
    assert [len(t.nbest) for t in b] == [len(t.nbest) for t in a]
    assert b[2].nbest[0].text == ""  # empty after normalization
    for x, y in zip(a, b):
        assert all(math.isfinite(h.score) for h in y.nbest)
        assert abs(x.nbest[0].score - y.nbest[0].score) < 0.1  # the best hypothesis' log-probability per token
    att = int8.translate(SENTENCES[:1], beam=2, attention=True)[0].attention
    assert att is not None and att.weights.shape[1] == len(att.src_pieces)


def test_the_server_engine_decodes_in_int8(checkpoint):
    """The server's torch engine at int8 answers what the int8 API translates, n-best texts and scores, and they are
    not fp32's: the engine decoded in int8."""
    from nmt import Translator
    from nmt.serve.engines import TorchEngine

    def answers(translator: Translator) -> list[list[tuple[str, float]]]:
        return [[(h.text, round(h.score, 4)) for h in t.nbest] for t in translator.translate(SENTENCES, beam=2, n_best=2)]

    engine = TorchEngine(str(checkpoint), "auto", "int8", threads=1)
    out = engine.translate(SENTENCES, beam=2, n_best=2, attention=False)
    int8 = answers(Translator.load(checkpoint, precision="int8"))
    assert [[(h["tgt"], h["score"]) for h in r["n_best"]] for r in out] == int8
    assert [r["src"] for r in out] == SENTENCES and engine.info["precision"] == "int8"
    assert int8 != answers(Translator.load(checkpoint, precision="fp32"))


def test_loading_for_int8_says_when_activations_keep_7_bits(checkpoint, monkeypatch, caplog):
    """Users of a CPU without VNNI hear why int8 gains less there (nmt.int8.load_int8; the CLIs log at INFO)."""
    import nmt.int8

    for vnni in (False, True):
        monkeypatch.setattr(nmt.int8, "full_range", lambda flags=None, vnni=vnni: vnni)
        caplog.clear()
        with caplog.at_level("INFO", logger="nmt.int8"):
            nmt.int8.load_int8(checkpoint)
        assert ("activations keep 7 bits" in caplog.text) == (not vnni)
