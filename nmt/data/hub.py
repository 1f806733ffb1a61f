"""``data=hub``: a Hugging Face dataset with a ``translation`` column, from the hub or a local copy."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

import datasets
import numpy as np

from nmt.cache import cache_root
from nmt.config import DataConfig
from nmt.data.cache import map_cached
from nmt.data.text import SPLITS, DataError

log = logging.getLogger(__name__)

LOCAL_FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".arrow": "arrow"}


def _load_local_hub(folder: Path, split_names: Iterable[str]) -> datasets.DatasetDict:
    """A local copy of a hub dataset: a ``save_to_disk`` folder, or parquet/JSON(L)/Arrow files named
    by split as the hub lays them out (``zh-en/train-00000-of-00003.parquet``,
    ``iwslt2017-zh-en/validation/0000.parquet``, ``wmt19-test.parquet``, ``dev.jsonl``)."""
    if (folder / "dataset_dict.json").exists():
        return datasets.load_from_disk(str(folder))
    known = set(split_names) | {"train", "validation", "test", "dev"}
    files: dict[str, list[str]] = {}
    kinds = set()
    for f in sorted(p for p in folder.rglob("*") if p.suffix in LOCAL_FORMATS and p.is_file()):
        tokens = re.split(r"[-_./]", str(f.relative_to(folder).with_suffix("")))
        split = next((t for t in tokens if t in known), re.split(r"[-_.]", f.name, maxsplit=1)[0])
        files.setdefault(split, []).append(str(f))
        kinds.add(LOCAL_FORMATS[f.suffix])
    if not files:
        raise DataError(f"{folder} holds neither a save_to_disk copy nor parquet/JSON files")
    if len(kinds) > 1:
        raise DataError(f"{folder} mixes file formats {sorted(kinds)}; keep one")
    try:
        return datasets.load_dataset(kinds.pop(), data_files=files, cache_dir=str(cache_root() / "hf"))
    except Exception as e:  # the loaders raise many kinds; keep the message
        raise DataError(f"cannot read the dataset files in {folder}: {e}") from None


def load_hub(cfg: DataConfig) -> datasets.DatasetDict:
    """A hub dataset, or a local copy of one, with a ``translation`` column ({lang: text}); ``data.splits``
    maps our split names to the dataset's, ``data.holdout`` carves missing dev/test sets from train."""
    name = str(cfg.name)
    if (local := Path(name).expanduser()).is_dir():
        raw = _load_local_hub(local, cfg.splits.values())
    else:
        try:
            raw = datasets.load_dataset(name, cfg.config, revision=cfg.revision, data_dir=cfg.data_dir)
        except Exception as e:  # the hub and the loader raise many kinds; keep the message
            raise DataError(f"cannot load dataset {name!r} (config {cfg.config!r}): {e}") from None
    out = {}
    for ours, theirs in cfg.splits.items():
        if ours not in SPLITS:
            raise DataError(f"data.splits key {ours!r} is not one of {', '.join(SPLITS)}")
        if (ds := raw.get(theirs)) is None:
            continue
        if "translation" not in ds.column_names:
            raise DataError(f"dataset {name!r} split {theirs!r} has no 'translation' column: {ds.column_names}")
        langs = [k for k, v in (ds[0]["translation"] if len(ds) else {}).items() if v is not None]
        if cfg.src_lang not in langs or cfg.tgt_lang not in langs:
            raise DataError(f"dataset {name!r} (config {cfg.config!r}) split {theirs!r} has languages {sorted(langs)}, "
                            f"not {cfg.src_lang}-{cfg.tgt_lang}")
        out[ours] = map_cached(ds, _flatten_translation, f"{ours}: reading {cfg.src_lang}-{cfg.tgt_lang} pairs",
                               batch_size=10_000, remove_columns=ds.column_names,
                               fn_kwargs={"src": cfg.src_lang, "tgt": cfg.tgt_lang})
    if cfg.holdout and "train" in out:
        out = _holdout(out, cfg)
    if not out:
        raise DataError(f"dataset {name!r} has none of the splits {list(cfg.splits.values())}: {list(raw)}")
    return datasets.DatasetDict(out)


def _flatten_translation(batch: dict, src: str, tgt: str) -> dict:
    return {"src": [t[src] for t in batch["translation"]], "tgt": [t[tgt] for t in batch["translation"]]}


def _holdout(out: dict, cfg: DataConfig) -> dict:
    """Seeded dev/test sets carved from train for the splits the dataset lacks."""
    want = {s: n for s, n in (("dev", cfg.dev_size), ("test", cfg.test_size)) if s not in out and n}
    if not want:
        return out
    train = out["train"]
    if sum(want.values()) >= len(train):
        raise DataError(f"data.dev_size + data.test_size = {sum(want.values())} leaves no training pairs of {len(train)}")
    parts = np.split(np.random.default_rng(cfg.seed).permutation(len(train)), np.cumsum(list(want.values())))
    for split, rows in zip([*want, "train"], parts):
        out[split] = train.select(np.sort(rows))
    log.info("held out from train: %s", ", ".join(f"{n} {s}" for s, n in want.items()))
    return out
