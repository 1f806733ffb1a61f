"""scripts/quality_levers.py: variants combine with '+', and a misspelt one is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from quality_levers import VARIANTS, overrides_of  # noqa: E402


def test_variants_combine_and_a_misspelt_one_is_named():
    assert overrides_of("tgt2k+hid512") == VARIANTS["tgt2k"] + VARIANTS["hid512"]
    assert overrides_of("baseline") == ["trainer.keep_last=5"]
    with pytest.raises(SystemExit, match="'hid51'"):
        overrides_of("tgt2k+hid51")
