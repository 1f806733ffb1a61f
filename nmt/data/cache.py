"""``Dataset.map`` runs that cache their output under $NMT_CACHE (``nmt.cache``), and how many processes they use."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Optional

import datasets

from nmt.cache import cache_root
from nmt.config import DataConfig
from nmt.device import available_cores


def num_workers(cfg: DataConfig, rows: int) -> Optional[int]:
    """Processes for ``Dataset.map``: data.num_proc, or one per core for corpora over 50k pairs."""
    n = cfg.num_proc or (available_cores() if rows > 50_000 else 1)
    return n if n > 1 and rows > n else None


def fingerprint(ds: datasets.Dataset) -> str:
    """datasets' own hash of a table and its history (what its map cache keys on). Private: datasets has no public
    accessor, and hashing the rows ourselves would read a corpus of millions of rows at every start."""
    return ds._fingerprint


def map_cached(ds: datasets.Dataset, fn: Callable, desc: str, num_proc: Optional[int] = None, key: str = "",
               **kw) -> datasets.Dataset:
    """``Dataset.map`` (progress bar ``desc``) cached under $NMT_CACHE/hf by the input's fingerprint and ``key``."""
    kw = {"batched": True, "batch_size": 2000, "num_proc": num_proc, "desc": desc, **kw}
    if not ds.cache_files:  # an in-memory table (a small corpus) stays in memory
        return ds.map(fn, keep_in_memory=True, **kw)
    folder = cache_root() / "hf" / "map"
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(f"{fingerprint(ds)}|{desc}|{key}".encode()).hexdigest()[:32]
    return ds.map(fn, cache_file_name=str(folder / f"{name}.arrow"), new_fingerprint=name, **kw)
