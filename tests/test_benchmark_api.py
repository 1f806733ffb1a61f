"""scripts/bench/benchmark_api.py: the API and nmt.evaluate, each pass a fresh process, side by side in one record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "benchmark_api.py"


def test_the_record_holds_each_way_s_page_faults_and_speed(trained_run, cli_env, explain, tmp_path):
    out = tmp_path / "api.json"
    cmd = [sys.executable, str(SCRIPT), str(trained_run), "--lines", "12", "--beam", "2", "--rounds", "2", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, timeout=600)
    assert proc.returncode == 0, explain(proc)
    r = json.loads(out.read_text())
    assert r["commit"] and r["date"] and r["command"][0] == "scripts/bench/benchmark_api.py"
    assert r["cpu"]["model"] and "flags" in r["cpu"]
    assert (r["split"], r["lines"], r["beam"], r["rounds"]) == ("dev", 12, 2, 2)
    rows = {x["way"]: x for x in r["rows"]}
    assert list(rows) == ["cli", "api", "api_no_setup"]
    assert rows["cli"]["command"][:2] == ["-m", "nmt.evaluate"] and "--src" in rows["cli"]["command"]
    assert len({x["bleu"] for x in rows.values()}) == 1  # one decoding: the same hypotheses every way
    for x in rows.values():
        assert x["sentences"] == 12 and len(x["process_minflt"]) == len(x["sentences_per_s"]) == 2
        assert all(f > 0 for f in x["process_minflt"]) and x["median_sentences_per_s"] > 0
    assert "pass_minflt" not in rows["cli"] and len(rows["api"]["pass_minflt"]) == 2
    assert rows["api"]["threads"] == [len(os.sched_getaffinity(0))] * 2  # the API set the process up: a thread per core
    api, cli = rows["api"], rows["cli"]
    assert r["over_cli"]["api"] == {"process_minflt": api["median_process_minflt"] / cli["median_process_minflt"],
                                    "sentences_per_s": api["median_sentences_per_s"] / cli["median_sentences_per_s"]}
    assert f"{cli['median_sentences_per_s']:,.1f} sent/s" in proc.stdout


@pytest.mark.parametrize("args, message", [(["--ways", "cli,gui"], "--ways: gui not in"),
                                           (["--lines", "0"], "--lines must be 1 or more, got 0")])
def test_bad_arguments_are_usage_errors(args, message, cli_env):
    proc = subprocess.run([sys.executable, str(SCRIPT), "run", *args], capture_output=True, text=True, env=cli_env)
    assert proc.returncode == 2 and message in proc.stderr
