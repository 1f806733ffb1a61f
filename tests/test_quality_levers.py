"""scripts/quality/quality_levers.py: variants combine with '+', and a misspelt one is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "quality"))

from quality_levers import VARIANTS, overrides_of, run_dir  # noqa: E402


def test_variants_combine_and_a_misspelt_one_is_named():
    assert overrides_of("tgt2k+hid512") == VARIANTS["tgt2k"] + VARIANTS["hid512"]
    assert overrides_of("baseline") == ["trainer.keep_last=5"]
    with pytest.raises(SystemExit, match="'hid51'"):
        overrides_of("tgt2k+hid51")


def test_run_folders_of_other_recipes_minutes_seeds_and_variants_differ(tmp_path):
    """Sittings may share --out: no two of (recipe, variant, seed, minutes) share a folder."""
    keys = [(r, v, s, m) for r in ("zh_en_global", "zh_en_local_m") for v in ("baseline", "enc1") for s in ("42", "43")
            for m in (7.0, 15.0)]
    assert len({run_dir(tmp_path, *k) for k in keys}) == len(keys)
    assert run_dir(tmp_path, "zh_en_local_m", "enc1", "42", 7.0).name == "zh_en_local_m-enc1_s42_7min"


def test_an_ensemble_of_a_run_with_itself_scores_as_the_run(trained_run):
    """``--ensemble``'s row: the members' best checkpoints decode as one model on dev and test at beam 5; a run
    ensembled with itself averages equal log-probabilities, so it scores exactly what the run alone scores."""
    from quality_levers import ensembled

    from nmt.data.corpus import load_corpus
    from nmt.translator import Translator

    alone = Translator.load(trained_run, "cpu")
    test = load_corpus(alone.config.data, need=("test",), splits=("test",))["test"]
    expected = alone.evaluate(list(test["src"]), [list(test["tgt"])], beam=5)
    row = ensembled([trained_run, trained_run])
    assert (row["test_bleu"], row["test_chrf"]) == (expected.bleu, expected.chrf)
    assert 0 <= row["best_valid_bleu"] <= 100


def test_reuse_reads_a_finished_run_of_the_same_overrides_and_refuses_another(tmp_path):
    """--reuse: a folder with metrics.json and the same overrides is read, not retrained; other overrides stop the
    sitting, naming the folder; an unfinished folder trains."""
    from quality_levers import finished

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    ran = ["+experiment=zh_en_local_p", "trainer.seed=42", "model.hidden_size=512"]
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ran))
    assert not finished(run, [*ran, f"hydra.run.dir={run}"])  # no metrics.json: it did not finish
    (run / "metrics.json").write_text("{}")
    assert finished(run, [*ran, f"hydra.run.dir={run}"])
    with pytest.raises(SystemExit, match=str(run)):
        finished(run, [*ran[:2], "model.hidden_size=256", f"hydra.run.dir={run}"])
