"""scripts/records/demo_record.py: ``make demo``'s record holds the run's own figures, and the README's block shows the
newest record git tracks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "records" / "demo_record.py"


def test_the_record_holds_what_the_demo_measured(trained_run, run_cli, cli_env, tmp_path, explain, monkeypatch):
    evaluation, translations = tmp_path / "evaluate_test.json", tmp_path / "translations.tsv"
    proc = run_cli("nmt.evaluate", trained_run, "--split", "test", "--beam", "2", "--json")
    assert proc.returncode == 0, explain(proc)
    evaluation.write_text(proc.stdout)
    proc = run_cli("nmt.translate", trained_run, "--beam", "2", "--with-source", "我爱你。", "你好。")
    assert proc.returncode == 0, explain(proc)
    translations.write_text(proc.stdout, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(trained_run), "--evaluation", str(evaluation),
                           "--translations", str(translations), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=cli_env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, explain(proc)
    (path,) = (tmp_path / "out").glob("demo_*.json")
    r = json.loads(path.read_text())
    metrics, test = json.loads((trained_run / "metrics.json").read_text()), json.loads(evaluation.read_text())
    assert (r["updates"], r["tgt_tok_per_s"], r["peak_memory_mb"]) == (
        metrics["steps"], metrics["train_tgt_tok_per_s"], metrics["peak_memory_mb"])
    assert (r["best_dev_bleu"], r["test"]["bleu"], r["test"]["chrf"]) == (metrics["best_valid_bleu"], test["bleu"], test["chrf"])
    assert [src for src, _ in r["translations"]] == ["我爱你。", "你好。"]
    assert ["\t".join(p) for p in r["translations"]] == proc_lines(translations)
    assert r["command"][0] == "scripts/records/demo_record.py" and r["train_command"] and r["commit"]
    assert r["cpu"]["model"] and r["cpu"]["cores"] >= 1 and isinstance(r["cpu"]["flags"], list)
    assert f"{r['updates']:,} updates" in proc.stdout and proc_lines(translations)[0] in proc.stdout

    monkeypatch.syspath_prepend(str(REPO))
    from scripts.records import render_quality

    records = tmp_path / "tracked"
    records.mkdir()
    monkeypatch.setattr(render_quality, "RECORDS", records)
    assert render_quality.demo().startswith("No record yet")
    older = {**r, "date": "2026-01-01T00:00:00", "updates": 1}
    (records / "demo_2026-01-01.json").write_text(json.dumps(older))
    (records / path.name).write_text(path.read_text())
    subprocess.run(["git", "init", "-q"], cwd=records, check=True)
    subprocess.run(["git", "add", "demo_2026-01-01.json"], cwd=records, check=True)
    assert "1 updates" in render_quality.demo()  # the newer record is not tracked yet
    subprocess.run(["git", "add", path.name], cwd=records, check=True)
    assert f"{r['updates']:,} updates" in render_quality.demo()


def proc_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line]
