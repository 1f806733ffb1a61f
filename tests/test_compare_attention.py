"""scripts/quality/compare_attention.py's plan and table: the order it runs, what it resumes, whom it trains twice."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "quality" / "compare_attention.py"


@pytest.fixture(scope="module")
def ca():
    spec = importlib.util.spec_from_file_location("compare_attention", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(ca, name: str, bleu: float, seed: int = 42) -> dict:
    return {"variant": name, "seed": seed, "dev_bleu": bleu, "test_bleu": bleu - 1, "dev_chrf": 40.0,
            "test_chrf": 39.0, "dev_ppl": 6.0, "parameters": 5_000_000, "updates": 3900,
            "train_tgt_tok_per_s": 5500, "decode_sents_per_s": 400.0}


def test_phase_one_is_interleaved_and_covers_every_variant(ca):
    names = [n for n, _ in ca.plan([])]
    assert len(names) == len(set(names)) == 11
    assert {n for n in names if "-" in n and not n.endswith("heads")} >= {
        f"{s}-{m}" for s in ("dot", "general", "concat") for m in ("global", "local_m", "local_p")}
    scores, modes = zip(*(n.split("-")[:2] for n in names))
    assert all(a != b for a, b in zip(scores, scores[1:]))  # neighbours never share a score
    assert all(not a == b == c for a, b, c in zip(modes, modes[1:], modes[2:]))  # nor three a mode
    for mode in ("global", "local_m", "local_p"):  # every mode in both halves: drift does not fall on one
        assert mode in modes[:6] and mode in modes[5:]


def test_resume_skips_finished_runs_and_phase_two_trains_top_three_and_bottom(ca):
    names = [n for n, _ in ca.plan([])]
    half = [row(ca, n, 20.0 + i) for i, n in enumerate(names[:5])]
    assert [n for n, _ in ca.plan(half)] == names[5:]  # resumes where it stopped
    full = [row(ca, n, 20.0 + i) for i, n in enumerate(names)]
    second = ca.plan(full)
    ranked = names[::-1]  # the BLEU above grows with the position
    assert second == [(ranked[0], 43), (names[0], 43), (ranked[1], 43), (ranked[2], 43)]
    done = full + [row(ca, n, 25.0, seed=43) for n, _ in second]
    assert ca.plan(done) == []


def test_table_shows_the_seed_spread_and_the_paper(ca):
    rows = [row(ca, "general-local_p", 30.0), row(ca, "general-local_p", 31.0, seed=43), row(ca, "dot-global", 29.0)]
    lines = ca.table(rows)
    assert lines[2].startswith("| `general-local_p` | 30.50 (30.00 / 31.00) | 29.50 (29.00 / 30.00) | 1.00 / 1.00 |")
    assert lines[2].endswith("| 19.0 |") and lines[3].endswith("| 18.6 |")
    assert "one seed" in lines[3]
