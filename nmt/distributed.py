"""DistributedDataParallel under ``torchrun``: set-up and the few collective calls training needs
(no-ops for a single process)."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist

from nmt.config import ConfigError
from nmt.device import pick_device

# Ranks > 0 wait while rank 0 works alone: preparing a corpus (WMT19 zh-en: 26M pairs at the
# measured ~25k pairs/s is 17 minutes before sentencepiece) or validating. NCCL's default: 10 minutes.
WAIT_TIMEOUT = timedelta(hours=12)
_wait_group: Optional[dist.ProcessGroup] = None  # gloo, with WAIT_TIMEOUT, for barrier()


def setup(device_name: str) -> tuple[int, int, torch.device]:
    """Join the process group (NCCL on CUDA, gloo on CPU, or $NMT_DIST_BACKEND); returns rank,
    world size, device. Local rank i uses GPU i; under gloo, ranks may share GPUs (i mod count)."""
    rank, size, local = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))
    device = pick_device(device_name)
    if size > 1:
        backend = os.environ.get("NMT_DIST_BACKEND") or ("nccl" if device.type == "cuda" else "gloo")
        if backend not in ("nccl", "gloo"):
            raise ConfigError(f"NMT_DIST_BACKEND={backend!r} is not valid; choose nccl or gloo")
        if device.type == "cuda":
            gpus = torch.cuda.device_count()
            if backend == "nccl" and local >= gpus:
                raise ConfigError(f"local rank {local} but {gpus} GPU(s): NCCL cannot share a GPU (NMT_DIST_BACKEND=gloo can)")
            device = torch.device("cuda", local % gpus)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group(backend)
        global _wait_group
        _wait_group = dist.new_group(backend="gloo", timeout=WAIT_TIMEOUT)
    return rank, size, device


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    """Wait for every rank, however long one works alone (up to WAIT_TIMEOUT; CPU-side, gloo)."""
    if active():
        dist.barrier(group=_wait_group)


def seed_rank(seed: int, rank: int, step: int) -> None:
    """Give ranks > 0 their own torch RNG stream (dropout masks) from (seed, rank, step): rank 0 keeps its
    own, so one process draws what it always did; ``step`` gives a resumed run fresh streams."""
    if rank:
        torch.manual_seed(hash((seed, rank, step)) % 2**63)  # ints hash the same in every process


def any_true(flag: bool, device: torch.device) -> bool:
    """True on every rank if ``flag`` is true on any (keeps ranks in step when one decides to stop)."""
    if not active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def from_rank0(value: str) -> str:
    """Rank 0's ``value`` on every rank: one decision for all (e.g. a precision chosen by timing)."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def cleanup() -> None:
    global _wait_group
    if active():
        dist.destroy_process_group()
    _wait_group = None
