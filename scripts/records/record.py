"""The scripts' one record writer: every figure a script measures goes to JSON with where and when it was measured
(date, commit, command line, CPU model and the flags that decide matmul speed, the GPU's name where there is one),
so that docs/results/ holds data a later session can render and compare (scripts/records/render_records.py).

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # in a script under scripts/<purpose>/
    from scripts.records.record import record, save
    save(args.json, record({"rows": rows}))
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    """``git ARGS`` in this checkout, its output stripped ("" where git or the checkout is missing)."""
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu() -> dict:
    """The CPU: model, cores, and its flags among the AMX and AVX-512 ones (``lscpu | grep -o 'amx[a-z_]*\\|avx512_bf16'``
    and the int8 VNNI ones), from nmt.device.cpu_info: a figure measured on one CPU says little about another."""
    from nmt.device import cpu_info

    return cpu_info()


def gpu() -> Optional[str]:
    """The first CUDA device's name, None without one."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def command(argv: Optional[Sequence[str]] = None) -> list[str]:
    """The command line: the script's path from the repository root, then its arguments (``argv``: sys.argv[1:])."""
    script = Path(sys.argv[0]).resolve()
    name = str(script.relative_to(REPO)) if script.is_relative_to(REPO) else sys.argv[0]
    return [name, *(sys.argv[1:] if argv is None else argv)]


def record(figures: dict, argv: Optional[Sequence[str]] = None) -> dict:
    """``figures`` under the record's provenance: date, commit, ``dirty`` (tracked files differ from it), command,
    cpu, gpu."""
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")), "command": command(argv),
            "cpu": cpu(), "gpu": gpu(), **figures}


def save(path: Optional[str | Path], data: object) -> None:
    """Write ``data`` (a record, or a list of them) as indented JSON at ``path``; nothing where ``path`` is None."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
