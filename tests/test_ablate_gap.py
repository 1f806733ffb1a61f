"""scripts/ablate_gap.py: its Eole-like encoder patch changes exactly what it claims to."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import ablate_gap  # noqa: E402

from nmt import encoder as enc  # noqa: E402


def test_unpacked_runs_the_encoder_over_the_padding(monkeypatch):
    """With the patch the shorter row's memory and final state change (its padding is read); the longest row's not."""
    monkeypatch.setattr(enc, "pack_padded_sequence", enc.pack_padded_sequence)  # undone after the test
    torch.manual_seed(0)
    model = enc.Encoder(50, 8, 8, 2, True, "lstm", 0.0).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    lens = torch.tensor([4, 2])
    mem, (h, _) = model(src, lens)
    ablate_gap.unpacked()
    mem2, (h2, _) = model(src, lens)
    assert torch.allclose(mem[0], mem2[0]) and torch.allclose(h[:, 0], h2[:, 0])
    assert not torch.allclose(h[:, 1], h2[:, 1]) and not torch.allclose(mem[1, :2], mem2[1, :2])
