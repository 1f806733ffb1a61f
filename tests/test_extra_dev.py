"""data.extra_dev: more dev sets scored at every validation; early stopping and best.pt follow the dev split."""

from __future__ import annotations

import json

import pytest
from helpers import digits_cfg
from omegaconf import OmegaConf

from nmt.config import ConfigError, TrainConfig
from nmt.config_check import validate
from nmt.train import train


def test_every_validation_scores_the_extra_sets(digits_dir, tmp_path, caplog):
    cfg = digits_cfg(digits_dir, max_steps=20, valid_every=10, test_beam=0)
    cfg.data.extra_dev = [str(digits_dir / "test"), str(digits_dir / "dev")]
    with caplog.at_level("INFO", "nmt.validation"):
        metrics = train(cfg, tmp_path / "run")
    history = metrics["history"]
    assert [h["step"] for h in history] == [10, 20]
    for h in history:
        assert set(h["extra"]) == {"test", "dev"}
        assert h["extra"]["dev"]["bleu"] == pytest.approx(h["valid_bleu"])  # the dev split itself, scored again
    assert "| test BLEU" in caplog.text and "| dev BLEU" in caplog.text
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["history"] == json.loads(json.dumps(history))


def test_a_missing_or_ragged_set_is_refused_by_name(tmp_path, digits_dir):
    from nmt.data.text import DataError
    from nmt.validation import extra_dev_sets

    cfg = OmegaConf.structured(TrainConfig)
    cfg.data.extra_dev = [str(tmp_path / "wmt22")]
    with pytest.raises(ConfigError, match=r"data.extra_dev\[0\]=.*wmt22: .*wmt22.zh not found"):
        validate(cfg)
    (tmp_path / "wmt22.zh").write_text("一\n二\n", encoding="utf-8")
    (tmp_path / "wmt22.en").write_text("one\n", encoding="utf-8")
    with pytest.raises(DataError, match="wmt22.zh has 2 lines"):
        extra_dev_sets(cfg.data)
