"""Word dropout (trainer.src_word_dropout, trainer.tgt_word_dropout): pieces read as <unk> at the rate asked, special
ids and the loss's targets untouched, nothing drawn when off, and a rate out of range refused by name."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.config import ConfigError, TrainConfig
from nmt.config_check import validate
from nmt.update import word_dropout
from nmt.vocab import BOS, EOS, PAD, UNK


def batch(n: int = 200):
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(5, 30, (n,), generator=g).tolist()
    src = [torch.randint(EOS + 1, 500, (k,), generator=g).tolist() for k in lens]
    tgt = [torch.randint(EOS + 1, 500, (k + 3,), generator=g).tolist() for k in lens]
    return make_batch(src, tgt, list(range(n)))


def test_off_is_the_batch_itself_and_draws_nothing():
    b = batch()
    state = torch.get_rng_state()
    assert word_dropout(b, 0.0, 0.0) is b
    assert torch.equal(torch.get_rng_state(), state)  # runs without word dropout keep their dropout masks


@pytest.mark.parametrize("src_p,tgt_p", [(0.1, 0.0), (0.0, 0.25), (0.2, 0.2)])
def test_rate_and_specials(src_p, tgt_p):
    b = batch()
    torch.manual_seed(1)
    d = word_dropout(b, src_p, tgt_p)
    for before, after, p in ((b.src, d.src, src_p), (b.tgt_in, d.tgt_in, tgt_p)):
        words = before > EOS
        dropped = (after != before)
        assert bool((after[dropped] == UNK).all())
        assert not bool((dropped & ~words).any())  # PAD, BOS, EOS stay
        assert abs(dropped.sum().item() / words.sum().item() - p) < 0.03
    assert torch.equal(d.tgt_out, b.tgt_out)  # the loss still scores the true words
    assert bool((d.tgt_in[:, 0] == BOS).all()) and bool((d.src == PAD).eq(b.src == PAD).all())


@pytest.mark.parametrize("key,value", [("src_word_dropout", 1.0), ("tgt_word_dropout", -0.1)])
def test_out_of_range_is_refused_by_name(key, value):
    cfg = OmegaConf.structured(TrainConfig)
    cfg.trainer.max_steps = 10  # a run needs a budget
    cfg.trainer[key] = value
    with pytest.raises(ConfigError, match=f"trainer.{key}={value}"):
        validate(cfg)
