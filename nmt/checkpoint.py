"""Self-contained checkpoints (weights, config, tokenizer, training state), written atomically (temp
file, fsync, rename) so a crash never leaves a half-written file; loaded with ``weights_only=True``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import torch

from nmt.build import build_model
from nmt.config import from_dict
from nmt.model import Seq2Seq
from nmt.tokenizer import Tokenizer


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupt or not ours."""


REQUIRED = ("model", "config", "tokenizer", "format")
FORMAT = 1


def save(state: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({**state, "format": FORMAT}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def resolve(path: Union[str, Path]) -> Path:
    """A checkpoint file, or a run directory (its best.pt, else last.pt)."""
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("checkpoints/best.pt", "checkpoints/last.pt", "best.pt", "last.pt"):
            if (p / name).is_file():
                return p / name
        raise CheckpointError(f"{p} holds no checkpoints/best.pt or checkpoints/last.pt")
    if not p.exists():
        raise CheckpointError(f"checkpoint {p} does not exist")
    return p


def load(path: Union[str, Path], map_location: Union[str, torch.device] = "cpu") -> dict[str, Any]:
    p = resolve(path)
    try:
        state = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on bad files
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"checkpoint {p} is corrupt or truncated ({first})") from None
    if missing := [k for k in REQUIRED if k not in state] if isinstance(state, dict) else list(REQUIRED):
        raise CheckpointError(f"{p} is not an nmt checkpoint (missing {', '.join(missing)})")
    return state


def load_model(path: Union[str, Path], device: Union[str, torch.device] = "cpu",
               engine: str = "fast") -> tuple[Seq2Seq, Tokenizer, Any, dict]:
    """Model (eval mode, on ``device``, in ``engine``: nmt/build.py), tokenizer, config and the raw state of a
    checkpoint."""
    state = load(path)
    cfg = from_dict(state["config"])
    tok = Tokenizer.from_state(state["tokenizer"])
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, engine)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise CheckpointError(f"{resolve(path)}: weights do not fit the stored config ({str(e).splitlines()[0]})") from None
    return model.to(device).eval(), tok, cfg, state
