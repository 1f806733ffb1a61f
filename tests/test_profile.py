"""scripts/profile_decoding.py: the record's ops are the profile's, heaviest first, with their shares."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

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
