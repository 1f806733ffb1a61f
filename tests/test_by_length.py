"""scripts/quality/by_length.py: each run's dev and test BLEU by source length, as nmt.evaluate scores them, in a
record that the docs' table renders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_record_holds_each_splits_buckets_and_renders(trained_run, run_cli, cli_env, tmp_path, explain,
                                                        monkeypatch):
    out = tmp_path / "by_length_tiny.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality" / "by_length.py"), str(trained_run),
                           "--beam", "2", "--buckets", "4,8", "--json", str(out)], capture_output=True, text=True,
                          env=cli_env, timeout=600)
    assert proc.returncode == 0, explain(proc)
    r = json.loads(out.read_text())
    assert r["commit"] and r["cpu"]["model"] and r["beam"] == 2
    (run,) = r["runs"]
    assert run["mode"] == "local_p" and run["steps"] > 0 and [x["set"] for x in run["rows"]] == ["dev", "test"]
    ref = run_cli("nmt.evaluate", trained_run, "--split", "dev", "--split", "test", "--beam", "2", "--by-length",
                  "--buckets", "4,8", "--json")
    assert ref.returncode == 0, explain(ref)
    for row, want in zip(run["rows"], json.loads(ref.stdout)):  # the script's figures are evaluate's own
        assert (row["bleu"], row["chrf"], row["by_length"]) == (want["bleu"], want["chrf"], want["by_length"])
        assert sum(b["sentences"] for b in row["by_length"]) == row["sentences"]
    sys.path.insert(0, str(ROOT))
    from scripts.records import render_quality

    monkeypatch.setattr(render_quality, "RECORDS", tmp_path)
    table = render_quality.by_length()
    assert table.count("| general, local_p |") == 2 and "by_length_tiny.json" in table
