"""The compiled decoder step, a construction argument (trainer.compile; training falls back in test_train.py)."""

from __future__ import annotations

import torch


def test_the_compiled_step_is_a_construction_argument(make_model, random_sources):
    """fast_ops(compile_step=True) routes the decoder's loop through CompiledStep; plain ops leave ``_step`` as it is.
    (CompiledStep's values against eager: tests/test_train.py and tests/test_cuda.py.)"""
    from nmt.compiled_step import CompiledStep
    from nmt.ops import fast_ops

    compiled, plain = make_model(ops=fast_ops(compile_step=True)), make_model()
    assert isinstance(compiled.decoder.loop_step, CompiledStep)
    assert compiled.decoder.loop_step.eager == compiled.decoder._step
    assert plain.decoder.loop_step == plain.decoder._step


def test_a_fault_of_the_step_itself_is_raised_not_taken_for_a_compile_failure(monkeypatch, caplog):
    """CompiledStep falls back to eager only when eager runs: an error of the step raises as itself, unwarned."""
    import pytest

    from nmt.compiled_step import CompiledStep

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
