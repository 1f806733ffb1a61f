"""Default behaviours that had no test of their own: early stopping on dev BLEU (the default
metric), a Hydra multirun sweep (and scripts/quality/sweep_table.py on it), and sacrebleu's zh tokenizer
for a Chinese target. Training goes through the real CLI on the embedded corpus with a 32-unit model.
"""

from __future__ import annotations

import json
import re

import pytest
import sacrebleu
from helpers import BASE
from omegaconf import OmegaConf

from nmt.metrics import score


# --------------------------------------------------------------------------- early stopping
def test_early_stopping_on_dev_bleu(run_cli, tmp_path, explain):
    """trainer.early_stopping_metric=bleu (the default) with patience 2: a learning rate too small to
    change any weight keeps dev BLEU where it is, so the first validation (step 3) sets the best and the
    run stops after two more without a better score (a tie is no improvement): at step 9 of 60."""
    run = tmp_path / "run"
    proc = run_cli("nmt.train", *BASE, "trainer.lr=1e-12", "trainer.max_steps=60", "trainer.valid_every=3",
                   "trainer.log_every=3", "trainer.early_stopping_patience=2", f"hydra.run.dir={run}")
    assert proc.returncode == 0, explain(proc)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["stopped_by"] == "early stopping"
    assert metrics["steps"] == 9 and [h["step"] for h in metrics["history"]] == [3, 6, 9]
    assert len({h["valid_bleu"] for h in metrics["history"]}) == 1  # the frozen model: one score
    assert "early stopping: no better dev bleu in 2 validations" in proc.stdout, explain(proc)  # Hydra logs to stdout
    assert "early stopping: no better dev bleu in 2 validations" in (run / "train.log").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- a Hydra multirun sweep
def test_multirun_sweep_and_its_table(run_cli, tmp_path, explain):
    """``nmt.train -m model.hidden_size=16,32`` trains two complete runs, one per value, each with its
    own config, in a folder named by its number and overrides (cut to 120 characters and a hash: BASE's overrides
    alone pass the 255-byte file-name limit); scripts/quality/sweep_table.py prints one row for each."""
    sweep = tmp_path / "sweep"
    proc = run_cli("nmt.train", "-m", *BASE, "trainer.max_steps=4", "trainer.valid_every=4", "model.hidden_size=16,32",
                   f"hydra.sweep.dir={sweep}", timeout=400)
    assert proc.returncode == 0, explain(proc)
    runs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [p.name[:2] for p in runs] == ["0_", "1_"] and all(len(p.name) <= 122 and "~" in p.name for p in runs)
    for run, hidden in zip(runs, (16, 32)):
        assert (run / "checkpoints" / "last.pt").is_file() and (run / "metrics.json").is_file(), run
        assert json.loads((run / "metrics.json").read_text())["steps"] == 4
        assert OmegaConf.load(run / ".hydra" / "config.yaml").model.hidden_size == hidden
    table = run_cli("scripts.quality.sweep_table", sweep)
    assert table.returncode == 0, explain(table)
    lines = table.stdout.splitlines()
    assert len(lines) == 4 and lines[0].startswith("| experiment | overrides | steps |"), table.stdout
    rows = lines[2:]
    assert sorted(re.search(r"model\.hidden_size=(\d+)", r).group(1) for r in rows) == ["16", "32"], table.stdout
    assert all(r.split(" | ")[2] == "4" for r in rows), table.stdout  # the steps column


# --------------------------------------------------------------------------- BLEU of a Chinese target
ZH_REFS = ["我们明天去北京。", "图书馆在学校里边。", "谢谢你！不客气。"]
ZH_HYPS = ["我们明天去上海。", "图书馆在学校里边。", "谢谢你！不客气。"]  # one word wrong, no spaces anywhere


@pytest.mark.parametrize("tgt_lang", ["zh", "zh-TW"])
def test_chinese_target_is_scored_with_the_zh_tokenizer(tgt_lang):
    """A target language starting with "zh" scores BLEU with sacrebleu's zh tokenizer (one token a
    character): exactly corpus_bleu(tokenize="zh"), signature tok:zh. Under 13a, the English default,
    each unspaced sentence would be one token and this near-perfect output would score 0."""
    got = score(ZH_HYPS, [ZH_REFS], tgt_lang)
    want = sacrebleu.corpus_bleu(ZH_HYPS, [ZH_REFS], tokenize="zh")
    assert want.sys_len == want.ref_len == 25  # characters, not sentences
    assert got.bleu == pytest.approx(want.score) and got.bleu > 80
    assert "|tok:zh|" in got.bleu_signature
    english = score(ZH_HYPS, [ZH_REFS], "en")
    assert "|tok:13a|" in english.bleu_signature and english.bleu == pytest.approx(0.0)
    assert english.bleu == pytest.approx(sacrebleu.corpus_bleu(ZH_HYPS, [ZH_REFS], tokenize="13a").score)
