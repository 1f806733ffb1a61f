"""scripts/checks/gpu_check.py on the CPU: a clear stop without a GPU, and its --smoke form end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "checks" / "gpu_check.py"


def test_without_a_gpu_it_says_so_and_measures_nothing(cli_env, tmp_path):
    out = tmp_path / "g.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out)], cwd=REPO, env=cli_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "no CUDA GPU is visible" in proc.stderr
    assert not out.exists()


def test_smoke_runs_every_part_and_writes_the_figures(cli_env, tmp_path, explain):
    out = tmp_path / "g.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--json", str(out)], cwd=REPO, env=cli_env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, explain(proc)
    result = json.loads(out.read_text())
    assert "skipped" in result["tests"]["summary"] and result["tests"]["exit"] == 0  # pytest -m cuda ran
    tests = result["tests"]
    assert tests["tests"] == tests["skipped"] >= 8 and set(tests["test_seconds"]) and "CUDA tests: 0 passed" in proc.stdout
    for key in ("bench_small_fp32", "bench_small_bf16"):
        assert result[key]["train"]["tgt_tok_per_s"] > 0
    assert set(result["bench_small_bf16"]["decode"]) == {"greedy", "beam5"}
    paper = result["paper_bf16"]
    # a fraction of the bf16 matmul peak; on a CPU that emulates bf16 (0.27 GFLOP/s at the smoke's 256 x 256,
    # 2 repeats) the model, whose packed LSTMs run at their own speed, can pass that noisy peak: no upper bound
    assert paper["mean_batch_sents"] == 128 and paper["bf16_peak_fraction"] > 0
    for row in ("bench-small train fp32", "paper 4x1000 peak memory", "decode beam5 (dev)"):
        assert row in proc.stdout


def test_a_gpu_run_whose_cuda_tests_were_all_skipped_fails(tmp_path):
    """The JUnit report's counts decide: on a GPU a skipped CUDA test fails the check (on the CPU, --smoke, skips
    are expected); the next run's time limit comes from these tests' measured seconds."""
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check

    report = tmp_path / "r.xml"
    report.write_text('<testsuites><testsuite><testcase name="a" time="2.5"><skipped message="no GPU"/></testcase>'
                      '<testcase name="b" time="40.0"/><testcase name="c" time="1.0"><failure message="x"/></testcase>'
                      '</testsuite></testsuites>')
    counts, seconds = gpu_check.junit_counts(report)
    assert counts == {"tests": 3, "passed": 1, "failed": 1, "skipped": 1} and seconds == {"a": 2.5, "b": 40.0, "c": 1.0}
    all_skipped = {"exit": 0, "summary": "3 skipped", "tests": 3, "passed": 0, "failed": 0, "skipped": 3}
    assert "3 of 3 tests skipped" in gpu_check.tests_verdict(all_skipped, on_gpu=True)
    assert gpu_check.tests_verdict(all_skipped, on_gpu=False) is None
    assert gpu_check.tests_verdict({**all_skipped, "skipped": 0, "passed": 3}, on_gpu=True) is None
    assert "1 failed" in gpu_check.tests_verdict({**all_skipped, "exit": 1, "summary": "1 failed"}, on_gpu=True)
    previous = tmp_path / "g.json"
    assert gpu_check.tests_timeout(previous)[0] == gpu_check.FIRST_TIMEOUT
    previous.write_text(json.dumps({"tests": {"test_seconds": seconds}}))
    assert gpu_check.tests_timeout(previous)[0] == 3 * 43.5 + 120

