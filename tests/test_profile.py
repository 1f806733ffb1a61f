"""scripts/bench/profile_decoding.py: the record's ops are the profile's, heaviest first, with their shares."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))

from profile_decoding import top_ops  # noqa: E402


def test_top_ops_are_the_heaviest_with_their_share_and_calls():
    a, b = torch.randn(300, 300), torch.randn(300)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            a @ a
        for _ in range(3):
            torch.tanh(b)
    ops = top_ops(prof, 10)
    assert [o["self_ms"] for o in ops] == sorted((o["self_ms"] for o in ops), reverse=True)
    assert 0 < sum(o["share"] for o in ops) <= 1.0 + 1e-9
    calls = {o["op"]: o["calls"] for o in ops}
    assert calls.get("aten::tanh") == 3 and any("mm" in k for k in calls)
    assert len(top_ops(prof, 1)) == 1


def test_profile_training_writes_the_steps_profile_and_the_matmul_share(tmp_path, cli_env, train_overrides):
    """scripts/bench/profile_training.py on the tiny model: timed tokens/s, the top ops heaviest first, a matmul share."""
    import json
    import subprocess

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "profile_training.py"
    out = tmp_path / "profile.json"
    overrides = [o for o in train_overrides if not o.startswith(("+experiment", "trainer.device"))]
    proc = subprocess.run([sys.executable, str(script), "--config", "zh_en_local_p", "--warmup", "1", "--steps", "2",
                           "--rows", "8", "--json", str(out), *overrides], capture_output=True, text=True,
                          env=cli_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["precision"] == "fp32" and r["steps"] == 2 and r["tgt_tok_per_s"] > 0
    assert [o["self_ms"] for o in r["ops"]] == sorted((o["self_ms"] for o in r["ops"]), reverse=True)
    assert 0 < r["matmul_share"] < 1 and r["matmul_ms"] <= r["total_ms"]
    assert "every other op free would give" in proc.stdout


def test_profile_decoding_writes_the_matmul_share_and_the_bound_it_gives(tmp_path, trained_run, cli_env):
    """scripts/bench/profile_decoding.py on the session's trained run, int8 beam search: its matmuls (fp32 and int8) are a
    share of the op time, and with every other op free the pass would be that much faster than measured."""
    import json
    import subprocess

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "profile_decoding.py"
    out = tmp_path / "profile.json"
    proc = subprocess.run([sys.executable, str(script), str(trained_run), "--beam", "3", "--precision", "int8",
                           "--limit", "12", "--rows", "30", "--json", str(out)], capture_output=True, text=True,
                          env=cli_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["sentences"] == 12 and r["precision"] == "int8"
    assert 0 < r["matmul_share"] < 1
    assert abs(r["sents_per_s"] - 12 / r["wall_ms"] * 1000) < 1e-6
    assert r["bound_sents_per_s"] == pytest.approx(r["sents_per_s"] / r["matmul_share"])
    assert any(o["op"] == "quantized::linear_dynamic" for o in r["ops"])  # int8's matmuls are counted as matmuls
    assert "every other op free would give" in proc.stdout
    assert r["matmul_gflops"] > 0 and r["peak_gflops"] > 0  # the encoder's and attention's fp32 products, FLOP-counted


def test_matmul_ms_counts_matrix_products_only():
    from profile_decoding import matmul_ms

    a, b = torch.randn(300, 300), torch.randn(300_000)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        a @ a
        torch.tanh(b)
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1000
    mm = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key == "aten::mm") / 1000
    assert matmul_ms(prof) == pytest.approx(mm) and 0 < mm < total
