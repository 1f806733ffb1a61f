"""DistributedDataParallel under ``torchrun``: set-up and the few collective calls training needs.

Without torchrun (WORLD_SIZE unset or 1) every function here is a no-op for a single process.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def setup(device_name: str) -> tuple[int, int, torch.device]:
    """Join the process group (NCCL on CUDA, gloo on CPU); returns rank, world size, device."""
    from nmt.device import pick_device

    rank, size, local = world()
    device = pick_device(device_name)
    if size > 1:
        if device.type == "cuda":
            device = torch.device("cuda", local)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, size, device


def active() -> bool:
    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    if active():
        dist.barrier()


def any_true(flag: bool, device: torch.device) -> bool:
    """True on every rank if ``flag`` is true on any (keeps ranks in step when one decides to stop)."""
    if not active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def cleanup() -> None:
    if active():
        dist.destroy_process_group()
