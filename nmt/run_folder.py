"""A run's folder and resuming it: the checkpoint to continue from, what it restores, the files written at the start."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf

from nmt import checkpoint
from nmt.config import TrainConfig, to_dict
from nmt.optim import Schedule
from nmt.tokenizer import Tokenizer
from nmt.train_state import TrainingState
from nmt.version import __version__

log = logging.getLogger(__name__)


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
    state = checkpoint.load(p)
    state["source"] = str(checkpoint.resolve(p))  # where it came from (adopt_best)
    return state


# how batches are segmented, not what the weights are: the new config's value holds on resume and fine-tuning
BATCH_TIME = ("tokenizer.sample_alpha", "tokenizer.sample_nbest")


def merge_resumed_config(cfg: DictConfig, state: dict, who: str = "resume", others: bool = True) -> DictConfig:
    """Model and tokenizer settings come from the checkpoint (they define the weights); the rest
    from the new config. A model or tokenizer difference is warned; with ``others`` every other difference
    is logged too (a resumed run; a fine-tuning run, trainer.init_from, expects them). ``who``: the log prefix.
    A key that an older checkpoint lacks is the schema's default: what its weights were trained with."""
    kept = {section: _with_defaults(section, state["config"][section]) for section in ("model", "tokenizer")}
    old, new = flatten({**state["config"], **kept}), flatten(to_dict(cfg))
    hint = "; start a new run to change it" if who == "resume" else ""
    for key in sorted(set(old) | set(new)):
        if key.startswith("trainer.resume") or old.get(key) == new.get(key):
            continue
        if key.split(".")[0] in ("model", "tokenizer") and key not in BATCH_TIME:  # the weights were trained for these
            log.warning("%s: %s=%r is ignored: the checkpoint's %r is kept (its weights were trained with it%s)",
                        who, key, new.get(key), old.get(key), hint)
        elif others or key in BATCH_TIME:
            log.info("%s: %s is %r in the checkpoint, %r now: the new config wins", who, key, old.get(key), new.get(key))
    merged = OmegaConf.merge(cfg, kept)
    for key in BATCH_TIME:
        OmegaConf.update(merged, key, OmegaConf.select(cfg, key))
    return merged  # type: ignore[return-value]


def _with_defaults(section: str, saved: dict) -> dict:
    """A checkpoint's ``model`` or ``tokenizer`` settings over the schema's defaults (keys the schema no longer has
    are dropped)."""
    schema = OmegaConf.structured(TrainConfig)[section]
    return to_dict(OmegaConf.merge(schema, {k: v for k, v in saved.items() if k in schema}))


def restore(resumed: dict, tr: DictConfig, model: torch.nn.Module, opt: torch.optim.Optimizer, schedule: Schedule,
            scaler: torch.amp.GradScaler, state: TrainingState, rank: int, world_size: int, device: torch.device) -> bool:
    """Weights, and unless ``trainer.reset_*`` says otherwise optimizer, schedule, counters (the clock among
    them) and RNG; True if this rank's RNG states came from the checkpoint."""
    model.load_state_dict(resumed["model"])
    if not tr.reset_optimizer:
        opt.load_state_dict(resumed["optimizer"])
        if resumed.get("scaler"):
            scaler.load_state_dict(resumed["scaler"])
    if not tr.reset_scheduler and resumed.get("schedule"):
        schedule.load_state_dict(resumed["schedule"])
    own_rng = False
    if not tr.reset_counters:
        per_update = state.per_update
        state.load_state_dict(resumed["counters"])
        continue_epoch(state, per_update)
        own_rng = restore_rng(resumed["rng"], rank, world_size, device)
    log.info("resumed at step %d (epoch %d, update %d of it) | reset: optimizer %s, scheduler %s, counters %s",
             state.step, state.epoch + 1, state.update_in_epoch, tr.reset_optimizer, tr.reset_scheduler,
             tr.reset_counters)
    return own_rng


def restore_rng(rng: dict, rank: int, world_size: int, device: torch.device) -> bool:
    """This rank's torch (and CUDA) RNG states from a checkpoint; ranks > 0 need one written by as many
    ranks (else they draw fresh streams: False)."""
    ranks = rng.get("ranks")
    mine = ranks[rank] if ranks and len(ranks) == world_size else rng if rank == 0 else None
    if mine is None:
        return False
    torch.set_rng_state(mine["torch"])
    if device.type == "cuda" and mine.get("cuda") is not None:
        torch.cuda.set_rng_state(mine["cuda"], device)
    return True


def continue_epoch(state: TrainingState, per_update: int) -> None:
    """Resuming with another number of processes or ``trainer.accum_steps``: an update now takes
    ``per_update`` batches of the epoch's list; the epoch goes on from the first batch the checkpoint's
    run had not used (rounded up to a whole update), in the same order."""
    before = state.per_update or per_update  # checkpoints before the field: taken as unchanged
    if before != per_update:
        used = state.update_in_epoch * before
        state.update_in_epoch = -(-used // per_update)
        log.warning("resume: an update took %d batches (processes × trainer.accum_steps), now %d: the epoch goes on "
                    "from batch %d of its list; steps count the new, larger or smaller, updates", before, per_update,
                    state.update_in_epoch * per_update)
    state.per_update = per_update


def adopt_best(resumed: Optional[dict], ckpt_dir: Path) -> None:
    """A run resumed from another run's checkpoint starts with that run's ``best.pt`` (its counters carry
    that best score, which only a better one replaces), or with the resumed checkpoint if none is beside it."""
    if resumed is None or (ckpt_dir / "best.pt").exists() or Path(resumed["source"]).parent == ckpt_dir.resolve():
        return
    beside = Path(resumed["source"]).with_name("best.pt")
    if beside.is_file():  # copied as it is (a temporary name, then a rename: never half-written)
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir / f".best.pt.tmp{os.getpid()}"
        shutil.copyfile(beside, tmp)
        os.replace(tmp, ckpt_dir / "best.pt")
    else:
        log.warning("resume: no best.pt beside %s: it is this run's best.pt until a validation beats it", resumed["source"])
        checkpoint.save({k: v for k, v in resumed.items() if k != "source"}, ckpt_dir / "best.pt")


def write_run_files(run_dir: Path, tok: Tokenizer, data_report: dict[str, Any], world_size: int, device: torch.device) -> None:
    """Sentencepiece models, ``run_info.json`` and ``data_report.json``; stale temporary checkpoints removed."""
    tok.save(run_dir)
    for stale in (run_dir / "checkpoints").glob(".*.tmp*"):  # left by a process killed while writing
        stale.unlink()
    info = {"version": __version__, "git_commit": git_commit(), "torch": torch.__version__,
            "argv": sys.argv, "world_size": world_size, "device": str(device)}
    (run_dir / "run_info.json").write_text(json.dumps(info, indent=1))
    (run_dir / "data_report.json").write_text(json.dumps(data_report, indent=1))
