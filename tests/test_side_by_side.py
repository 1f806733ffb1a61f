"""scripts/peers/side_by_side.py refuses a missing peer harness at once, before its 15-minute budget run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "peers" / "side_by_side.py"


def test_missing_peer_harness_fails_before_any_run(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path), "--peers-dir", str(tmp_path / "nowhere"),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--peers-dir" in proc.stderr and "no run.sh there" in proc.stderr
    assert not out.exists()  # nothing trained, nothing written


def test_decoding_batches_match_the_peers_harness_settings():
    """tokens:N holds N real source tokens a batch at any beam (translate counts source tokens × beam)."""
    sys.path.insert(0, str(SCRIPT.parents[1] / "bench"))
    from benchmark import decode_batch

    assert decode_batch("default", 5) == {}
    assert decode_batch("tokens:8000", 5) == {"batch_tokens": 40_000, "batch_sentences": 100_000}
    assert decode_batch("tokens:8000", 1)["batch_tokens"] == 8000
    assert decode_batch("sents:30", 5)["batch_sentences"] == 30
    for bad in ("tokens:", "words:5", "sents:0"):
        try:
            decode_batch(bad, 5)
        except ValueError as e:
            assert bad in str(e)
        else:
            raise AssertionError(bad)


def test_the_table_puts_each_peer_and_batch_setting_beside_ours():
    sys.path.insert(0, str(SCRIPT.parent))
    from side_by_side import table

    figs = {"train_tgt_tok_per_s": 6000.0, "bleu_beam5": 24.5}
    theirs = {"train_tgt_tok_per_s": 5000.0, "bleu_beam5": 15.0}
    med = {"eole@default": {"ours": figs, "theirs": theirs, "ratio": {k: figs[k] / theirs[k] for k in figs}},
           "eole@tokens:8000": {"ours": figs, "theirs": figs, "ratio": dict.fromkeys(figs, 1.0)}}
    text = table(med, {k: v["ratio"] for k, v in med.items()}, list(med))
    assert "| nmt (default) | Eole (default) | ratio | nmt (tokens:8000) | Eole (tokens:8000) | ratio |" in text
    assert "| train_tgt_tok_per_s | 6,000 | 5,000 | 1.20× | 6,000 | 6,000 | 1.00× |" in text
    assert "| bleu_beam5 | 24.50 | 15.00 | 1.63× |" in text


def test_decode_sitting_refuses_a_missing_model_before_decoding(tmp_path):
    """scripts/peers/decode_side_by_side.py names the missing model or harness and decodes nothing."""
    script = SCRIPT.parent / "decode_side_by_side.py"
    proc = subprocess.run([sys.executable, str(script), "--data", str(tmp_path), "--ours", str(tmp_path / "none.pt"),
                           "--eole", str(tmp_path), "--bench", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / 'bench_util.py'}: not found" in proc.stderr


def test_the_peer_trains_for_the_budget_ours_had(tmp_path):
    """--budget-minutes reaches the peer's harness (BENCH_BUDGET_S), not only our run: a 5-minute sitting once
    trained Eole for the harness's default 15."""
    import argparse

    sys.path.insert(0, str(SCRIPT.parent))
    from side_by_side import peer_bench

    harness = tmp_path / "peers"
    harness.mkdir()
    (harness / "run.sh").write_text('mkdir -p "$BENCH_OUT/results"\n'  # the driver's results, as the harness writes them
                                    'echo "{\\"budget_s\\": $BENCH_BUDGET_S, \\"driver\\": \\"$1\\"}" '
                                    '> "$BENCH_OUT/results/eole.json"\n')
    args = argparse.Namespace(peer_out=str(tmp_path / "bench"), data=str(tmp_path / "data" / "tatoeba"),
                              peers_dir=str(harness), budget_minutes=5.0, smoke=False)
    assert peer_bench(args, tmp_path, "eole", "tokens:8000") == {"budget_s": 300, "driver": "run_eole.sh"}
