"""What the speed scripts share: candidates measured in alternating rounds (a machine's speed drifts within minutes,
so every round measures every candidate, in reverse order every other round) and a pass in a fresh process of its
own, as a user runs one (its answer: the last line it prints, as JSON)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional, TypeVar

T = TypeVar("T")


def alternate(names: Sequence[str], rounds: int, measure: Callable[[str], T], warmup: int = 0) -> dict[str, list[T]]:
    """``measure(name)`` for every name in each of ``warmup + rounds`` rounds, every other round in reverse order;
    the warm-up rounds' figures are dropped."""
    out: dict[str, list[T]] = {n: [] for n in names}
    for r in range(warmup + rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            x = measure(name)
            if r >= warmup:
                out[name].append(x)
    return out


def child_json(cmd: Sequence[str], what: str, cwd: Optional[Path] = None, env: Optional[dict] = None) -> object:
    """Run ``cmd`` in a process of its own; the last line it printed, as JSON. A failure ends this script, naming
    ``what`` and the child's last line of errors."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=cwd, env=env)
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise SystemExit(f"{what} failed: {why}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
