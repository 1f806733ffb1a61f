"""scripts/tune_search.py: every setting decodes dev and test; the pick is by dev alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tune_search.py"


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
    assert all(0 <= r["test_bleu"] <= 100 and r["dev_sents_per_s"] > 0 for r in run["rows"])
