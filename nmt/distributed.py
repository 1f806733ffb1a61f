"""DistributedDataParallel under ``torchrun``: set-up and the few collective calls training needs
(no-ops for a single process)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Optional, TypeVar

import torch
import torch.distributed as dist

from nmt.config import ConfigError
from nmt.device import pick_device

# Ranks > 0 wait while rank 0 works alone: preparing a corpus (WMT19 zh-en: 26M pairs at the
# measured ~25k pairs/s is 17 minutes before sentencepiece) or validating. NCCL's default: 10 minutes.
WAIT_TIMEOUT = timedelta(hours=12)
T = TypeVar("T")
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


def from_rank0(value: T) -> T:
    """Rank 0's ``value`` on every rank: one decision for all (a precision chosen by timing, the outcome of a
    validation). Any picklable value; a collective call, so every rank must make it."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def rank0_float(value: float, device: torch.device) -> float:
    """Rank 0's number on every rank (one small broadcast: the run's clock at each update)."""
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    return float(t.item())


def all_ranks(value: T) -> list[T]:
    """Every rank's ``value``, in rank order, on every rank (the RNG states a checkpoint stores)."""
    if not active():
        return [value]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def checksum(params: Iterable[torch.Tensor]) -> int:
    """An exact fingerprint of the parameters' bits: integer sums (order-free, so equal on every
    rank for equal bits, whatever the reduction order) of each tensor's bytes as int32 (or int16) words,
    weighted by the tensor's position so that swapped tensors differ too."""
    total = 0
    for k, p in enumerate(params):
        words = p.detach().contiguous().reshape(-1)
        words = words.view(torch.int32 if words.element_size() == 4 else torch.int16 if words.element_size() == 2
                           else torch.int64)
        total = (total + (k + 1) * int(words.sum(dtype=torch.int64))) % 2**61
    return total


def ranks_agree(params: Iterable[torch.Tensor], device: torch.device) -> bool:
    """True on every rank if the parameters are bit-identical on all ranks (one all-reduce of two numbers)."""
    if not active():
        return True
    c = float(checksum(params) % 2**52)  # exact in float64, which every backend reduces
    t = torch.tensor([c, -c], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t[0] == -t[1])


def cleanup() -> None:
    global _wait_group
    if active():
        dist.destroy_process_group()
    _wait_group = None
