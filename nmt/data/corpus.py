"""A corpus by its config: the source that ``data.source`` names (a module each), then cleaned."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

import datasets

from nmt.config import DataConfig
from nmt.data.clean import clean
from nmt.data.files import load_files
from nmt.data.hsk import load_hsk
from nmt.data.hub import load_hub
from nmt.data.tatoeba import load_tatoeba
from nmt.data.text import DataError

LOADERS = {"tatoeba": load_tatoeba, "hsk": load_hsk, "files": load_files, "hub": load_hub}


def load_raw(cfg: DataConfig) -> datasets.DatasetDict:
    """The corpus as read, before cleaning: ``src``/``tgt`` text columns per split."""
    if cfg.source in ("tatoeba", "hsk") and sorted((cfg.src_lang, cfg.tgt_lang)) != ["en", "zh"]:  # the packaged corpora
        raise DataError(f"the {cfg.source} corpus is zh-en; data.src_lang/tgt_lang={cfg.src_lang}/{cfg.tgt_lang}")
    return LOADERS[cfg.source](cfg)


def clean_splits(raw: datasets.DatasetDict, cfg: DataConfig, need: Iterable[str], report: Optional[dict] = None,
                 splits: Optional[Iterable[str]] = None) -> datasets.DatasetDict:
    """Clean the ``splits`` of ``raw`` (all by default); the ones in ``need`` must be there and keep a pair."""
    need = tuple(need)
    if missing := [split for split in need if split not in raw]:
        raise DataError(f"corpus {cfg.dir or cfg.name or cfg.source} has no {missing[0]!r} split, which is needed here")
    wanted = set(splits) if splits is not None else set(raw)
    out = datasets.DatasetDict({k: clean(v, cfg, k, report) for k, v in raw.items() if k in wanted})
    if empty := [split for split in need if len(out[split]) == 0]:
        raise DataError(f"split {empty[0]!r} is empty after cleaning")
    return out


def load_corpus(cfg: DataConfig, need: Iterable[str] = ("train", "dev"),
                splits: Optional[Iterable[str]] = None) -> datasets.DatasetDict:
    """Load and clean (``clean_splits``): only ``splits`` if given."""
    return clean_splits(load_raw(cfg), cfg, need, splits=splits)
