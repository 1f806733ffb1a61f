"""Device, precision and CPU-thread choices, made once at start-up."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import resource

import torch

from nmt.config import ConfigError


def pick_device(name: str = "auto") -> torch.device:
    """CUDA if present, else MPS, else CPU; an explicit name must be available; CUDA gets TF32 fp32 matmuls."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r} was asked for but CUDA is not available")
        # TF32 tensor cores for fp32 matmuls (torch leaves them off; cuDNN's LSTMs already use them). cudnn.benchmark
        # stays off: its tuning is per shape and batch shapes vary; RNN kernels do not use it
        try:
            torch.backends.cuda.matmul.fp32_precision = "tf32"  # torch >= 2.9
        except AttributeError:
            torch.backends.cuda.matmul.allow_tf32 = True
    return dev


def available_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


_SET_UP: dict[str, int] = {}  # "threads": what set_threads last chose in this process (none: not set up yet)


def set_threads(threads: int = 0) -> None:
    """One intra-op thread per core (0 = all cores); inter-op work is not worth a thread here. Also
    ``keep_freed_memory`` and ``bound_onednn_cache``: every command that computes starts here (``Translator.load``
    through ``setup_process``)."""
    _SET_UP["threads"] = max(1, threads or available_cores())
    torch.set_num_threads(_SET_UP["threads"])
    keep_freed_memory()
    bound_onednn_cache()


ONEDNN_CACHE = 64  # oneDNN primitives kept (its default: 1,024)


def bound_onednn_cache() -> None:
    """Keep at most ``ONEDNN_CACHE`` oneDNN primitives (bf16 matmuls, the encoder's LSTM), unless the environment's
    ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` says. Batches change the matmuls' shapes, and at the default 1,024 the cache
    grows through training to hundreds of MB (bench-small in bf16 on an avx512_bf16 EPYC: peak 1,349 MB against
    1,106 MB at 64, the same tokens/s; record ab_train_onednn_cache_caps.json). oneDNN reads the variable when it
    makes its first primitive, so this must run before the first matmul."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_CACHE))


def setup_process() -> bool:
    """Set this process up as the commands do, ``set_threads(0)``, unless ``set_threads`` already ran in it: a
    command's own, the server's single thread or a script's ``--threads`` stay as chosen, so nothing is set twice
    two ways. ``Translator.load`` calls it, so that a Python caller decodes as fast as the commands, with as few page
    faults. True if it set the process up here."""
    if _SET_UP:
        return False
    set_threads(0)
    return True


def keep_freed_memory() -> bool:
    """Have glibc keep freed blocks for reuse rather than return them to the OS: a training step or a search
    step frees and allocates blocks of megabytes (gates, logits over the vocabulary), and by default many
    come back as fresh pages that fault in one by one (bench-small, 250 training steps: 1.63 M page faults,
    0.19 M with this; 1-8 % more target tokens/s in alternating runs, 5 % faster beam search). The process holds up to 1 GB of
    freed memory. False where the C library is not glibc or the MALLOC_ variables already say."""
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        # mallopt(M_MMAP_THRESHOLD = -3, 32 MB: the largest glibc allows), mallopt(M_TRIM_THRESHOLD = -1, 1 GB)
        return bool(libc.mallopt(-3, 32 << 20)) and bool(libc.mallopt(-1, 1 << 30))
    except (OSError, AttributeError):
        return False


def autocast(device: torch.device, precision: str):
    """Autocast context for ``precision`` (auto = bf16 on CUDA, fp32 elsewhere; bf16_output is the
    callers' own: ``batch_loss(precision=...)``, ``beam_search(bf16_output=...)``)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision in ("fp32", "bf16_output", "int8"):  # int8: the model's own modules (nmt/int8.py)
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process: CUDA allocations on a GPU, else the resident set size."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


PRECISIONS = ("fp32", "bf16", "bf16_output", "int8")  # of decoding (nmt.translate, nmt.evaluate, nmt.serve, Translator)
PRECISION_HELP = ("decode in fp32 (default), bf16 autocast, bf16_output (only the vocabulary projection in bf16, the rest "
                  "fp32) or int8 (the CPU only: int8 weights, activations quantized at each matmul; nmt/int8.py). bf16 can be "
                  "faster on GPUs and on CPUs with AMX/avx512_bf16, bf16_output on such CPUs also at small batches "
                  "(elsewhere both likely slower); outputs may differ slightly (int8 most)")
NATIVE_BF16 = ("amx_bf16", "avx512_bf16")  # CPU flags with bf16 matrix instructions


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """The CPU's model name and flags from /proc/cpuinfo ("unknown" and none where there is none)."""
    model, flags = "unknown", frozenset()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = frozenset(value.split())
                break
    except OSError:  # not Linux
        pass
    return model, flags


def cpu_flags() -> frozenset[str]:
    """Every flag /proc/cpuinfo gives this CPU (none off Linux)."""
    return _cpuinfo()[1]


def cpu_info() -> dict:
    """The CPU model and the flags that decide matmul speed (AMX, avx512_bf16, avx512f, the int8 VNNI ones), from
    /proc/cpuinfo: figures measured on one CPU say little about another, so every speed figure carries these."""
    model, flags = _cpuinfo()
    wanted = [f for f in sorted(flags) if f.startswith("amx") or f in ("avx512_bf16", "avx512f", "avx512_vnni", "avx_vnni")]
    return {"model": model, "flags": wanted, "cores": available_cores(), "native_bf16": any(f in flags for f in NATIVE_BF16)}


def cpu_trains_bf16_rnns() -> bool:
    """Whether oneDNN here can train an LSTM over a padded (unpacked) batch under bf16 autocast, as the decoder
    without input feeding does: not on a CPU with AVX2 only (2026-12-02: "could not create a primitive descriptor
    for the LSTM", though packed sequences and decoding worked), where bf16 matmuls are emulated anyway."""
    lstm = torch.nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.enable_grad(), torch.autocast("cpu", torch.bfloat16):
            lstm(torch.zeros(1, 2, 4))[0].float().sum().backward()
    except RuntimeError:
        return False
    return True


def warn_slow_bf16(device: torch.device, precision: str) -> None:
    """Warn that bf16 on a CPU without bf16 matrix instructions is emulated, so likely slower than fp32."""
    if precision in ("bf16", "bf16_output") and device.type == "cpu" and not cpu_info()["native_bf16"]:
        logging.getLogger(__name__).warning("bf16 on a CPU without AMX/avx512_bf16 will likely be slower than fp32")
