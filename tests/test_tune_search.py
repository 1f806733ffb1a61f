"""scripts/quality/tune_search.py: every setting decodes dev and test; the pick is by dev alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "quality" / "tune_search.py"


def test_tune_search_picks_by_dev_and_keeps_the_default(tmp_path, trained_run, cli_env, explain):
    out = tmp_path / "tune.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(trained_run), "--beams", "5", "--alphas", "0.6,1.0",
                           "--stops", "full,first", "--json", str(out)], capture_output=True, text=True, env=cli_env,
                          timeout=600)
    assert proc.returncode == 0, explain(proc)
    record = json.loads(out.read_text())
    assert record["commit"] and record["cpu"]["cores"] >= 1
    (run,) = record["runs"]
    assert {(r["alpha"], r["stop"]) for r in run["rows"]} == {(0.6, "full"), (0.6, "first"), (1.0, "full"), (1.0, "first")}
    assert run["dev_best"]["dev_bleu"] == max(r["dev_bleu"] for r in run["rows"])
    assert (run["default"]["beam"], run["default"]["alpha"], run["default"]["stop"]) == (5, 1.0, "full")
    assert all(r["dev_sents_per_s"] > 0 for r in run["rows"])
    from nmt import Translator
    from nmt.data.corpus import load_corpus

    api = Translator.load(trained_run, "cpu")
    test = load_corpus(api.config.data, need=("test",), splits=("test",))["test"]
    assert run["default"]["test_bleu"] == api.evaluate(list(test["src"]), [list(test["tgt"])], beam=5).bleu


def test_a_record_of_full_against_first_renders_one_line_a_run_and_the_means():
    sys.path.insert(0, str(SCRIPT.parents[2]))  # the repository root: scripts.*
    from scripts.records.render_quality import stop_pairs

    def row(stop: str, dev: float, test: float, speed: float) -> dict:
        return {"beam": 5, "alpha": 1.0, "stop": stop, "dev_bleu": dev, "test_bleu": test, "dev_sents_per_s": speed,
                "test_sents_per_s": speed}

    runs = [{"run": "a", "rows": [row("full", 30.0, 31.0, 100.0), row("first", 30.5, 30.8, 120.0)]},
            {"run": "b", "rows": [row("first", 29.0, 29.6, 150.0), row("full", 29.2, 29.0, 100.0)]}]
    lines = stop_pairs(runs)
    assert "| `a` | 5, 1 | 30.00 / 30.50 | 31.00 / 30.80 | +0.50 | -0.20 | 100 / 120 (1.20×) |" in lines
    assert "| `b` | 5, 1 | 29.20 / 29.00 | 29.00 / 29.60 | -0.20 | +0.60 | 100 / 150 (1.50×) |" in lines
    assert "| mean of 2 (1 with a higher test BLEU under `first`) | | | | +0.15 | +0.20 | (1.35×) |" in lines
