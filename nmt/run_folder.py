"""A run's folder and resuming it: the checkpoint to continue from, what it restores, the files written at the start."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf

from nmt import __version__, checkpoint
from nmt.config import to_dict
from nmt.optim import Schedule
from nmt.tokenizer import Tokenizer
from nmt.train_state import TrainingState

log = logging.getLogger("nmt.train")


def git_commit() -> Optional[str]:
    """The commit of the code that runs, if it is a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``."""
    out = {}
    for k, v in d.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def resume_state(resume: Optional[str], run_dir: Path) -> Optional[dict]:
    """The checkpoint to continue from: a path (file or run dir), or ``auto`` (this run's last.pt)."""
    if not resume:
        return None
    p = run_dir if resume == "auto" else Path(resume).expanduser()
    if p.is_dir() and (p / "checkpoints" / "last.pt").exists():
        p = p / "checkpoints" / "last.pt"
    elif resume == "auto":
        log.info("trainer.resume=auto: no %s yet, starting a new run", p / "checkpoints" / "last.pt")
        return None
    return checkpoint.load(p)


def merge_resumed_config(cfg: DictConfig, state: dict) -> DictConfig:
    """Model and tokenizer settings come from the checkpoint (they define the weights); the rest
    from the new config. Every difference is logged with the side that wins."""
    old, new = flatten(state["config"]), flatten(to_dict(cfg))
    for key in sorted(set(old) | set(new)):
        if key.startswith("trainer.resume") or old.get(key) == new.get(key):
            continue
        wins = "checkpoint" if key.split(".")[0] in ("model", "tokenizer") else "new config"
        log.info("resume: %s is %r in the checkpoint, %r now: the %s wins", key, old.get(key), new.get(key), wins)
    return OmegaConf.merge(cfg, {k: state["config"][k] for k in ("model", "tokenizer")})  # type: ignore[return-value]


def restore(resumed: dict, tr: DictConfig, model: torch.nn.Module, opt: torch.optim.Optimizer, schedule: Schedule,
            scaler: torch.amp.GradScaler, state: TrainingState, device: torch.device) -> None:
    """Weights, and unless ``trainer.reset_*`` says otherwise optimizer, schedule, counters and RNG."""
    model.load_state_dict(resumed["model"])
    if not tr.reset_optimizer:
        opt.load_state_dict(resumed["optimizer"])
        if resumed.get("scaler"):
            scaler.load_state_dict(resumed["scaler"])
    if not tr.reset_scheduler and resumed.get("schedule"):
        schedule.load_state_dict(resumed["schedule"])
    if not tr.reset_counters:
        state.load_state_dict(resumed["counters"])
        torch.set_rng_state(resumed["rng"]["torch"])
        if device.type == "cuda" and resumed["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(resumed["rng"]["cuda"], device)
    log.info("resumed at step %d (epoch %d, update %d of it) | reset: optimizer %s, scheduler %s, counters %s",
             state.step, state.epoch + 1, state.update_in_epoch, tr.reset_optimizer, tr.reset_scheduler,
             tr.reset_counters)


def write_run_files(run_dir: Path, tok: Tokenizer, data_report: dict[str, Any], world_size: int, device: torch.device) -> None:
    """Sentencepiece models, ``run_info.json`` and ``data_report.json``; stale temporary checkpoints removed."""
    tok.save(run_dir)
    for stale in (run_dir / "checkpoints").glob(".*.tmp*"):  # left by a process killed while writing
        stale.unlink()
    info = {"version": __version__, "git_commit": git_commit(), "torch": torch.__version__,
            "argv": sys.argv, "world_size": world_size, "device": str(device)}
    (run_dir / "run_info.json").write_text(json.dumps(info, indent=1))
    (run_dir / "data_report.json").write_text(json.dumps(data_report, indent=1))
