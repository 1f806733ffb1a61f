"""trainer.init_from: a new run from a trained model's weights and sentencepiece models, with a fresh optimizer,
schedule, counters and budget, on another corpus."""

from __future__ import annotations

import json
import logging

import pytest
from test_train import digits_cfg, digits_dir  # noqa: F401  (digits_dir: a fixture)

from nmt import checkpoint
from nmt.train import train


@pytest.fixture(scope="module")
def trained(digits_dir, tmp_path_factory):  # noqa: F811
    run = tmp_path_factory.mktemp("init_from") / "first"
    train(digits_cfg(digits_dir, max_steps=150, valid_every=150, test_beam=0), run)
    return run


def test_a_fine_tuned_run_starts_from_the_trained_weights_with_fresh_counters(trained, digits_dir, tmp_path,  # noqa: F811
                                                                               caplog):
    cfg = digits_cfg(digits_dir, max_steps=5, valid_every=5, test_beam=0, lr=0.001)
    cfg.trainer.init_from = str(trained)
    cfg.model.hidden_size = 64  # differs from the checkpoint's: ignored, said
    with caplog.at_level(logging.WARNING):
        tuned = train(cfg, tmp_path / "tuned")
    assert "init_from: model.hidden_size=64 is ignored: the checkpoint's 32 is kept" in caplog.text
    scratch = train(digits_cfg(digits_dir, max_steps=5, valid_every=5, test_beam=0, lr=0.001), tmp_path / "scratch")
    first = json.loads((trained / "metrics.json").read_text())["history"][-1]["valid_loss"]
    assert tuned["steps"] == 5  # its own counters, not the first run's 150 + 5
    assert tuned["history"][-1]["valid_loss"] < 0.8 * scratch["history"][-1]["valid_loss"]
    assert tuned["history"][-1]["valid_loss"] < first * 1.2  # where the first run was, not back at the start
    old, new = checkpoint.load(trained), checkpoint.load(tmp_path / "tuned")
    assert new["tokenizer"] == old["tokenizer"] and new["config"]["model"] == old["config"]["model"]
    assert new["config"]["trainer"]["init_from"] == str(trained)


def test_a_missing_start_is_one_clear_line(digits_dir, tmp_path, run_cli, explain):  # noqa: F811
    proc = run_cli("nmt.train", "data=files", f"data.dir={digits_dir}", "trainer.max_steps=2",
                   f"trainer.init_from={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode != 0, explain(proc)
    assert "nowhere does not exist" in proc.stderr and "Traceback" not in proc.stderr, explain(proc)
