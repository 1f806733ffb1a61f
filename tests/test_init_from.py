"""trainer.init_from: a new run from a trained model's weights and sentencepiece models, with a fresh optimizer,
schedule, counters and budget, on another corpus."""

from __future__ import annotations

import json
import logging

import pytest
from helpers import digits_cfg

from nmt import checkpoint
from nmt.train import train


@pytest.fixture(scope="module")
def trained(digits_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("init_from") / "first"
    train(digits_cfg(digits_dir, max_steps=150, valid_every=150, test_beam=0), run)
    return run


def test_a_fine_tuned_run_starts_from_the_trained_weights_with_fresh_counters(trained, digits_dir, tmp_path,
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


def test_a_missing_start_is_one_clear_line(digits_dir, tmp_path, run_cli, explain):
    proc = run_cli("nmt.train", "data=files", f"data.dir={digits_dir}", "trainer.max_steps=2",
                   f"trainer.init_from={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode != 0, explain(proc)
    assert "nowhere does not exist" in proc.stderr and "Traceback" not in proc.stderr, explain(proc)


def test_an_older_checkpoint_without_newer_keys_keeps_their_defaults_and_batch_time_keys_follow_the_new_config(caplog):
    """A checkpoint saved before model.tie_embeddings and tokenizer.sample_alpha existed was trained untied and
    unsampled: its missing keys are the defaults (a new value is refused with the default named); sample_alpha is
    how batches are segmented, not what the weights are, so the new config's value holds without a warning."""
    import logging

    from omegaconf import OmegaConf

    from nmt.config import TrainConfig, to_dict
    from nmt.run_folder import merge_resumed_config

    saved = to_dict(OmegaConf.structured(TrainConfig))
    for section, key in (("model", "tie_embeddings"), ("tokenizer", "sample_alpha"), ("tokenizer", "sample_nbest")):
        del saved[section][key]
    new = OmegaConf.structured(TrainConfig)
    new.model.tie_embeddings, new.tokenizer.sample_alpha = "decoder", 0.1
    with caplog.at_level(logging.INFO, "nmt.run_folder"):
        merged = merge_resumed_config(new, {"config": saved}, who="init_from", others=False)
    assert merged.model.tie_embeddings == "none" and merged.tokenizer.sample_alpha == 0.1
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["init_from: model.tie_embeddings='decoder' is ignored: the checkpoint's 'none' is kept "
                      "(its weights were trained with it)"]
