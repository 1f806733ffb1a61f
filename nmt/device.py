"""Device, precision and CPU-thread choices, made once at start-up."""

from __future__ import annotations

import contextlib
import os
import resource

import torch

from nmt.config import ConfigError


def pick_device(name: str = "auto") -> torch.device:
    """CUDA if present, else MPS, else CPU; an explicit name must be available. Picking CUDA
    also sets its fast defaults (``cuda_defaults``)."""
    if name == "auto":
        if torch.cuda.is_available():
            cuda_defaults()
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} was asked for but CUDA is not available")
    if dev.type == "cuda":
        cuda_defaults()
    return dev


def cuda_defaults() -> None:
    """TF32 tensor cores for fp32 matmuls (torch leaves them off; cuDNN's LSTMs already use
    them). cudnn.benchmark stays off: its tuning is per shape and batch shapes vary; RNN
    kernels do not use it. Touches no GPU, so a CPU process is unaffected."""
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # torch >= 2.9
    except AttributeError:
        torch.backends.cuda.matmul.allow_tf32 = True


def set_threads(threads: int = 0) -> None:
    """One intra-op thread per core (0 = all cores); inter-op work is not worth a thread here."""
    n = threads or len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (threads or os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))


def autocast(device: torch.device, precision: str):
    """Autocast context for ``precision`` (auto = bf16 on CUDA, fp32 elsewhere)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process: CUDA allocations on a GPU, else the resident set size."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
