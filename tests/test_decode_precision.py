"""Opt-in bf16 decoding (``precision="bf16"``, ``--precision bf16``): every attention mode and score
decodes under bf16 autocast to valid translations with finite fp32 scores; fp32 stays the default. The CLIs' int8
runs too (its values: tests/test_int8.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import nmt.device
from nmt.build import build_model
from nmt.checkpoint import save
from nmt.config import MODES, SCORES, to_dict
from nmt.decode import translate_nbest

SENTENCES = ["老师，您好！", "图书馆在学校里边。", "", "我今天很忙，明天再说吧。"]

REPO = Path(__file__).resolve().parents[1]


def tiny(cfg, tok, **attention):
    cfg = OmegaConf.merge(cfg, {"model": {"emb_size": 16, "hidden_size": 16, "encoder_layers": 1, "decoder_layers": 1,
                                          "dropout": 0.0, "attention": {"window": 2, **attention}}})
    torch.manual_seed(0)
    return cfg, build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).eval()


def output_dtypes(model) -> list[torch.dtype]:
    """The dtypes of the output projection's results, recorded from now on."""
    seen: list[torch.dtype] = []
    model.decoder.out.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    return seen


def assert_valid(results, n_best: int) -> None:
    assert len(results) == len(SENTENCES)
    assert results[2] == [("", 0.0)]  # empty after normalization
    for i, nbest in enumerate(results):
        if i == 2:
            continue
        assert len(nbest) == n_best
        scores = [s for _, s in nbest]
        assert all(isinstance(h, str) and "\n" not in h for h, _ in nbest)
        assert all(isinstance(s, float) and math.isfinite(s) and s <= 0 for s in scores), scores
        assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("score", SCORES)
def test_bf16_decoding_of_every_attention(hsk_cfg, hsk_tokenizer, mode, score):
    cfg, model = tiny(hsk_cfg, hsk_tokenizer, mode=mode, score=score, heads=2 if score == "scaled_dot" else 1)
    seen = output_dtypes(model)
    for beam, n_best in ((1, 1), (3, 2)):
        out = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=beam, n_best=n_best, precision="bf16")
        assert_valid(out, n_best)
    assert set(seen) == {torch.bfloat16}  # the matmuls ran in bf16 ...
    assert all(p.dtype == torch.float32 for p in model.parameters())  # ... from the fp32 weights, no copy


def test_fp32_is_the_default_and_bf16_stays_close(hsk_cfg, hsk_tokenizer):
    _, model = tiny(hsk_cfg, hsk_tokenizer, mode="local_p")
    seen = output_dtypes(model)
    fp32 = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=3)
    assert set(seen) == {torch.float32}
    assert_valid(fp32, 1)
    bf16 = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=3, precision="bf16")
    for a, b in zip(fp32, bf16):
        assert abs(a[0][1] - b[0][1]) < 0.5  # log-probabilities per token: bf16 rounding, not another model


@pytest.mark.parametrize("input_feeding", [True, False])
def test_bf16_output_decoding_projects_the_vocabulary_in_bf16_alone(hsk_cfg, hsk_tokenizer, input_feeding):
    """``precision="bf16_output"``: the search's logits come from a cached bf16 copy of W_s, every other
    step op stays fp32 (no autocast); the scores stay close to fp32's and the model is left as it was."""
    cfg = OmegaConf.merge(hsk_cfg, {"model": {"input_feeding": input_feeding}})
    _, model = tiny(cfg, hsk_tokenizer, mode="local_p", score="general")
    fp32 = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=3)
    dtypes: list[torch.dtype] = []
    model.decoder.W_c.register_forward_hook(lambda mod, inp, out: dtypes.append(out.dtype))
    for beam, n_best in ((1, 1), (3, 2)):
        out = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=beam, n_best=n_best, precision="bf16_output")
        assert_valid(out, n_best)
    assert set(dtypes) == {torch.float32}
    out = model.decoder.search_cache.get(model.decoder, True)[2]  # what the bf16_output search steps read
    assert out.weight.dtype == out.bias.dtype == torch.bfloat16 and torch.equal(out.weight, model.decoder.out.weight.bfloat16())
    assert not model.training
    again = translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=3, precision="bf16_output")
    for a, b in zip(fp32, again):
        assert abs(a[0][1] - b[0][1]) < 0.5  # bf16 rounding of the logits, not another model
    assert translate_nbest(model, hsk_tokenizer, str, SENTENCES, beam=3) == fp32  # fp32 again afterwards


@pytest.fixture(scope="module")
def checkpoint(hsk_cfg, hsk_tokenizer, tmp_path_factory):
    cfg, model = tiny(hsk_cfg, hsk_tokenizer, mode="local_p", score="general")
    path = tmp_path_factory.mktemp("precision_run") / "best.pt"
    save({"model": model.state_dict(), "config": to_dict(cfg), "tokenizer": hsk_tokenizer.to_state(), "step": 1}, path)
    return path


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_translate_cli_prints_one_line_per_input(checkpoint, run_cli, explain, precision):
    text = [s for s in SENTENCES if s] + ["谢谢你！"]
    proc = run_cli("nmt.translate", checkpoint, "--precision", precision, "--beam", "2", "--device", "cpu", *text)
    assert proc.returncode == 0, explain(proc)
    assert len(proc.stdout.splitlines()) == len(text), explain(proc)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_evaluate_cli_decodes_at_its_precision(checkpoint, run_cli, explain, tmp_path, precision):
    """nmt.evaluate --precision writes the API's hypotheses at that precision, not fp32's (they differ on these lines
    for this model), and scores them as the API does."""
    from nmt import Translator

    lines, refs = ["老师，您好！", "图书馆在学校里边。"], ["Hello, teacher!", "The library is inside the school."]
    src, ref, hyp = tmp_path / "dev.zh", tmp_path / "dev.en", tmp_path / "dev.hyp"
    src.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    ref.write_text("".join(s + "\n" for s in refs), encoding="utf-8")
    proc = run_cli("nmt.evaluate", checkpoint, "--src", src, "--ref", ref, "--beam", "2", "--precision", precision,
                   "--json", "--output", hyp)
    assert proc.returncode == 0, explain(proc)
    row = json.loads(proc.stdout)
    api = Translator.load(checkpoint, "cpu", precision).evaluate(lines, [refs], beam=2)
    assert hyp.read_text(encoding="utf-8").splitlines() == api.hypotheses
    assert api.hypotheses != [t.text for t in Translator.load(checkpoint, "cpu").translate(lines, beam=2)]
    assert (row["precision"], row["sentences"], row["bleu"], row["chrf"]) == (precision, 2, api.bleu, api.chrf)


@pytest.mark.parametrize("tool", ["translate", "evaluate"])
def test_precision_choices(tool, capsys):
    import importlib

    parser = importlib.import_module(f"nmt.{tool}")._parser()
    assert parser.parse_args(["ckpt"]).precision == "fp32"  # reduced precision is opt-in
    assert parser.parse_args(["ckpt", "--precision", "bf16"]).precision == "bf16"
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["ckpt", "--precision", "fp16"])
    assert e.value.code == 2 and "invalid choice: 'fp16'" in capsys.readouterr().err


def test_bf16_on_a_cpu_without_native_bf16_warns(monkeypatch, caplog):
    cpu = torch.device("cpu")
    monkeypatch.setattr(nmt.device, "cpu_info", lambda: {"native_bf16": False})
    with caplog.at_level("WARNING"):
        nmt.device.warn_slow_bf16(cpu, "fp32")
        assert not caplog.records
        nmt.device.warn_slow_bf16(cpu, "bf16")
    assert "slower" in caplog.text
    monkeypatch.setattr(nmt.device, "cpu_info", lambda: {"native_bf16": True})
    caplog.clear()
    nmt.device.warn_slow_bf16(cpu, "bf16")
    assert not caplog.records
