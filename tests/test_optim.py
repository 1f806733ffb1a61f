"""Learning-rate schedules and optimizers (nmt/optim.py) as pure functions of step and epoch."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from nmt.config import TrainerConfig
from nmt.optim import Schedule, build_optimizer


def sched(**kw) -> Schedule:
    return Schedule(OmegaConf.structured(TrainerConfig(**kw)))


def test_constant_with_warmup():
    s = sched(lr=0.5, warmup_steps=4)
    assert [s.lr(step, 0) for step in (1, 2, 4, 100)] == [0.125, 0.25, 0.5, 0.5]


def test_luong_halving_after_epoch_k():
    """The paper: lr 1.0 for epochs 1..5, then halved after every epoch (epochs are 0-based here)."""
    s = sched(lr=1.0, schedule="halving", halve_after_epoch=5)
    assert [s.lr(10, e) for e in range(8)] == [1, 1, 1, 1, 1, 0.5, 0.25, 0.125]


def test_inverse_sqrt_warms_up_then_decays():
    s = sched(lr=1e-3, schedule="inverse_sqrt", warmup_steps=100)
    assert s.lr(50, 0) == pytest.approx(5e-4)
    assert s.lr(100, 0) == pytest.approx(1e-3)
    assert s.lr(400, 0) == pytest.approx(5e-4)


def test_plateau_decays_after_patience_and_round_trips():
    s = sched(lr=1.0, schedule="plateau", plateau_patience=2, decay_factor=0.5)
    for bleu in (10, 12, 11, 11.5):  # two validations without beating 12
        s.on_validation(bleu)
    assert s.lr(1, 0) == 0.5
    t = sched(lr=1.0, schedule="plateau", plateau_patience=2, decay_factor=0.5)
    t.load_state_dict(s.state_dict())
    t.on_validation(11)
    t.on_validation(11)
    assert t.lr(1, 0) == 0.25 and math.isclose(s.lr(1, 0), 0.5)


@pytest.mark.parametrize("name,cls", [("sgd", torch.optim.SGD), ("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)])
def test_optimizers(name, cls):
    opt = build_optimizer(OmegaConf.structured(TrainerConfig(optimizer=name, lr=0.3)), [torch.nn.Parameter(torch.ones(2))])
    assert isinstance(opt, cls) and opt.param_groups[0]["lr"] == 0.3


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_optimizers_are_fused_and_step_like_the_plain_ones(name):
    """On the CPU the optimizer is torch's fused one (one kernel for all parameters), and a few
    updates land where the per-tensor implementation puts them."""
    cfg = OmegaConf.structured(TrainerConfig(optimizer=name, lr=0.1, weight_decay=0.01))
    torch.manual_seed(0)
    start = [torch.randn(5, 3), torch.randn(7)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(3)]
    params = [torch.nn.Parameter(p.clone()) for p in start]
    fused = build_optimizer(cfg, params)
    assert fused.defaults["fused"] is True
    plain_params = [torch.nn.Parameter(p.clone()) for p in start]
    kind = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    plain = kind(plain_params, lr=0.1, weight_decay=0.01)
    for gs in grads:
        for opt, ps in ((fused, params), (plain, plain_params)):
            for p, g in zip(ps, gs):
                p.grad = g.clone()
            opt.step()
    for a, b in zip(params, plain_params):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_budget_schedules_warm_up_then_reach_zero_when_the_budget_ends(kind):
    """linear/cosine follow the budget's progress (0..1), so any budget ends with lr 0."""
    s = sched(lr=2e-3, schedule=kind, warmup_steps=10)
    assert s.lr(5, 0, 0.0) == pytest.approx(1e-3)  # half-way through the warm-up
    assert s.lr(10, 0, 0.0) == pytest.approx(2e-3)
    assert s.lr(500, 0, 0.5) == pytest.approx(1e-3)  # both are at half the rate half-way
    assert s.lr(900, 0, 0.9) == pytest.approx(2e-4 if kind == "linear" else 2e-3 * 0.5 * (1 - math.cos(0.1 * math.pi)))
    assert s.lr(1000, 0, 1.0) == 0.0
    assert s.lr(1000, 0, 1.7) == 0.0  # a last update after the clock ran out


def test_budget_progress_is_the_largest_fraction_used():
    from nmt.budget import Budget

    b = Budget(max_steps=200, max_epochs=4, max_minutes=0, steps_per_epoch=100)
    assert b.progress(50, 0.5) == pytest.approx(0.25)
    assert b.progress(50, 2.0) == pytest.approx(0.5)  # epochs are the nearer limit
    timed = Budget(max_steps=0, max_epochs=0, max_minutes=10, steps_per_epoch=100)
    timed.start -= 150  # 2.5 of the 10 minutes have passed
    assert timed.progress(1, 0.0) == 0.0  # the clock is read at tick(), once for every rank
    timed.tick(torch.device("cpu"))
    assert timed.progress(1, 0.0) == pytest.approx(0.25, abs=0.01)
    resumed = Budget(max_steps=0, max_epochs=0, max_minutes=10, steps_per_epoch=100, used_seconds=300)
    resumed.tick(torch.device("cpu"))  # a resumed run's clock goes on from its checkpoint's
    assert resumed.progress(1, 0.0) == pytest.approx(0.5, abs=0.01) and resumed.here() < 1
