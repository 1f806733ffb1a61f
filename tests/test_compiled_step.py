"""The compiled decoder step, a construction argument (trainer.compile; training falls back in test_train.py)."""

from __future__ import annotations

import pytest
import torch


def test_the_compiled_step_is_a_construction_argument(make_model, random_sources):
    """build_model(compile_step=True) routes the fast engine's loop through CompiledStep; without it ``_step`` is as
    it is, and the plain engine has no compiled step. (CompiledStep's values against eager: tests/test_train.py and
    tests/test_cuda.py.)"""
    from omegaconf import OmegaConf

    from nmt.build import build_model
    from nmt.config import ConfigError, ModelConfig
    from nmt.engine.compiled import CompiledStep

    compiled, plain = make_model(compile_step=True), make_model()
    assert isinstance(compiled.decoder.loop_step, CompiledStep)
    assert compiled.decoder.loop_step.eager == compiled.decoder._step
    assert plain.decoder.loop_step == plain.decoder._step
    with pytest.raises(ConfigError, match="fast engine"):
        build_model(OmegaConf.structured(ModelConfig()), 10, 10, engine="plain", compile_step=True)


def test_a_fault_of_the_step_itself_is_raised_not_taken_for_a_compile_failure(monkeypatch, caplog):
    """CompiledStep falls back to eager only when eager runs: an error of the step raises as itself, unwarned."""
    from nmt.engine.compiled import CompiledStep

    def failing_compile(fn, **kw):
        return lambda *a: (_ for _ in ()).throw(RuntimeError("inductor: no C++ compiler"))

    monkeypatch.setattr(torch, "compile", failing_compile)

    def bad_step(x):
        raise ValueError(f"shape {tuple(x.shape)} does not fit")

    step = CompiledStep(bad_step)
    with pytest.raises(ValueError, match="does not fit"):
        step(torch.zeros(2))
    assert "running it eagerly" not in caplog.text
    good = CompiledStep(lambda x: x + 1)
    assert torch.equal(good(torch.zeros(2)), torch.ones(2)) and good.compiled is None
    assert "running it eagerly" in caplog.text and "no C++ compiler" in caplog.text
