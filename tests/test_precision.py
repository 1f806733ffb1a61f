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
    """``native(flag)``: pretend the CPU has (or lacks) bf16 instructions (nmt.device.cpu_info, which auto must not
    need); step timing must not run unless a test sets ``timings``."""
    timings: dict = {}

    def set_native(flag: bool, **ms: float):
        monkeypatch.setattr("nmt.device.cpu_info", lambda: {"native_bf16": flag})
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


@pytest.mark.parametrize("flag", [False, True])
def test_auto_is_fp32_on_every_cpu_without_timing(native, make_model, caplog, flag):
    """No start-up probe on a CPU: the same choice at every fresh start, whatever bf16 instructions it has, with the
    explicit setting named in the log."""
    native(flag)  # fake_step_ms fails the test if auto measured
    model = make_model(hidden_size=256, emb_size=256, tgt_vocab=4000)
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert {precision.choose(trainer(), model, CPU, []) for _ in range(3)} == {"fp32"}
    assert "trainer.precision=bf16" in caplog.text


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
    ({"fp32": 100.0, "bf16_output": 101.0, "bf16": 99.0}, "fp32"),  # within the timing's noise: no change
    ({"fp32": 100.0, "bf16_output": 85.0, "bf16": 80.0}, "fp32"),  # 1.25x: under the 1.3x margin
    ({"fp32": 100.0, "bf16_output": 90.0, "bf16": 75.0}, "bf16"),  # 1.33x: clearly faster
    ({"fp32": 60.0, "bf16_output": 90.0, "bf16": 100.0}, "fp32"),  # launch-bound small models time slower in bf16
])
def test_auto_on_a_gpu_keeps_bf16_only_where_it_clearly_pays(native, make_model, monkeypatch, caplog, ms,
                                                                      expected):
    """On CUDA auto measures (the step's time, synced) and keeps the fastest bf16 candidate only at 1.3x fp32's speed
    or more; a GPU without bf16 is fp32."""
    native(False, **ms)  # the CPU's flags play no part on a GPU
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    with caplog.at_level(logging.INFO, "nmt.precision"):
        assert precision.choose(trainer(), make_model(), torch.device("cuda"), []) == expected
    assert "a training pass takes fp32" in caplog.text
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert precision.choose(trainer(), make_model(), torch.device("cuda"), []) == "fp32"
