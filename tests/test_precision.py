"""trainer.precision=auto: what it picks, when it measures, and that bf16_output trains."""

from __future__ import annotations

import logging

import pytest
import torch
from omegaconf import OmegaConf

from nmt import precision
from nmt.config import TrainerConfig

CPU = torch.device("cpu")


def trainer(precision_: str = "auto", batch_tokens: int = 700):
    return OmegaConf.structured(TrainerConfig(precision=precision_, batch_tokens=batch_tokens))


@pytest.fixture
def native(monkeypatch):
    """``native(flag)``: pretend the CPU has (or lacks) bf16 instructions; step timing must not run
    unless a test sets ``timings``."""
    timings: dict = {}

    def set_native(flag: bool, **ms: float):
        monkeypatch.setattr(precision, "cpu_info", lambda: {"native_bf16": flag})
        timings.update(ms)

    def fake_step_ms(model, batches, device):
        assert timings, "auto measured where it should have decided without timing"
        return dict(timings)

    monkeypatch.setattr(precision, "step_ms", fake_step_ms)
    return set_native


def test_an_explicit_precision_is_kept_without_measuring(native, make_model):
    native(True)
    for p in ("fp32", "bf16", "bf16_output"):
        assert precision.choose(trainer(p), make_model(), CPU, []) == p


def test_auto_is_fp32_on_a_cpu_without_bf16_instructions(native, make_model, caplog):
    native(False)
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert precision.choose(trainer(), make_model(hidden_size=256, emb_size=256, tgt_vocab=4000), CPU, []) == "fp32"
    assert "neither avx512_bf16 nor AMX" in caplog.text


def test_auto_is_fp32_for_a_model_too_small_to_time(native, make_model, caplog):
    native(True)
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert precision.choose(trainer(), make_model(), CPU, []) == "fp32"
    assert "too small" in caplog.text


@pytest.mark.parametrize("ms, expected", [
    ({"fp32": 100.0, "bf16_output": 60.0, "bf16": 90.0}, "bf16_output"),
    ({"fp32": 100.0, "bf16_output": 95.0, "bf16": 65.0}, "bf16"),
    ({"fp32": 100.0, "bf16_output": 80.0, "bf16": 70.0}, "fp32"),  # under the 50 % a choice must gain
])
def test_auto_keeps_the_fastest_precision_that_clearly_beats_fp32(native, make_model, caplog, ms, expected):
    native(True, **ms)
    model = make_model(hidden_size=64, emb_size=64, tgt_vocab=4000)  # 0.36 GFLOP at the output projection
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert precision.choose(trainer(), model, CPU, []) == expected
    assert f"precision auto -> {expected}: a training pass takes fp32 100 ms" in caplog.text


def test_timing_leaves_the_model_gradients_and_random_numbers_as_they_were(make_model, random_sources):
    from nmt.batching import make_batch

    model = make_model(train=True, dropout=0.3, encoder_layers=2, decoder_layers=2)
    batches = [make_batch(random_sources(6, 2, 9, 23, seed=s), random_sources(6, 2, 9, 19, seed=s + 1), range(6))
               for s in (0, 2)]
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    ms = precision.step_ms(model, batches, CPU)
    assert set(ms) == {"fp32", "bf16_output", "bf16"} and all(0 < v < float("inf") for v in ms.values())
    assert torch.equal(torch.rand(3), expected)
    assert all(p.grad is None for p in model.parameters())


def test_bf16_output_runs_only_the_output_projection_in_bf16(make_model, random_sources):
    from nmt.batching import make_batch

    model = make_model()
    batch = make_batch(random_sources(4, 2, 6, 23), random_sources(4, 2, 6, 19, seed=1), range(4))
    args = (batch.src, batch.src_lens, tuple(batch.host_lens.tolist()), batch.tgt_in)
    fp32, _ = model(*args)
    logits, _ = model(*args, bf16_output=True)
    assert fp32.dtype == torch.float32 and logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits.float(), fp32, atol=0.05, rtol=0.05)
    logits.float().sum().backward()
    assert model.decoder.out.weight.grad.dtype == torch.float32


@pytest.mark.parametrize("ms, expected", [
    ({"fp32": 100.0, "bf16_output": 101.0, "bf16": 99.0}, "bf16"),  # no slower: bf16 also halves the activations
    ({"fp32": 60.0, "bf16_output": 90.0, "bf16": 100.0}, "fp32"),  # launch-bound small models time slower in bf16
])
def test_auto_on_a_gpu_times_the_passes_and_keeps_bf16_where_no_slower(native, make_model, monkeypatch, caplog, ms,
                                                                      expected):
    """On CUDA auto measures too (the step's time, synced), whatever the model's size; a GPU without bf16 is fp32."""
    native(False, **ms)  # the CPU's flags play no part on a GPU
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert precision.choose(trainer(), make_model(), torch.device("cuda"), []) == expected
    assert "a training pass takes fp32" in caplog.text
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert precision.choose(trainer(), make_model(), torch.device("cuda"), []) == "fp32"
