"""scripts/side_by_side.py refuses a missing peer harness at once, before its 15-minute budget run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "side_by_side.py"


def test_missing_peer_harness_fails_before_any_run(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path), "--peers-dir", str(tmp_path / "nowhere"),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--peers-dir" in proc.stderr and "no run.sh there" in proc.stderr
    assert not out.exists()  # nothing trained, nothing written
