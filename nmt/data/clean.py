"""The cleaning every split goes through: normalization, filters with counted reasons, deduplication."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Optional

import datasets
import numpy as np

from nmt.config import DataConfig
from nmt.data.cache import map_cached, num_workers
from nmt.data.normalize import normalizer

log = logging.getLogger(__name__)

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0/C1 controls left after normalization
REASONS = ("empty", "too_long", "control_chars", "length_ratio", "wrong_script")  # codes 1..5; 0 = kept
CLEAN_FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string"),
                                    "reason": datasets.Value("int8"), "key": datasets.Value("int64")})


def length_units(text: str) -> int:
    """Length comparable across scripts: one unit per CJK character, one per other word."""
    return len(CJK.findall(text)) + len(CJK.sub(" ", text).split())


def _filter_settings(cfg: DataConfig) -> dict:
    """The plain values the cleaning workers need (picklable, and part of the cache key)."""
    return {"src_opencc": cfg.opencc if cfg.src_lang.startswith("zh") else None,
            "tgt_opencc": cfg.opencc if cfg.tgt_lang.startswith("zh") else None,
            "zh": [lang.startswith("zh") for lang in (cfg.src_lang, cfg.tgt_lang)],
            "max_chars": cfg.max_chars, "drop_control": cfg.drop_control, "max_ratio": cfg.max_ratio,
            "script_check": cfg.script_check}


def _reason(s: str, t: str, f: dict) -> int:
    """0 for a usable pair, else the index + 1 of the first reason in ``REASONS`` that drops it."""
    if not s or not t:
        return 1
    if len(s) > f["max_chars"] or len(t) > f["max_chars"]:
        return 2
    if f["drop_control"] and (CONTROL.search(s) or CONTROL.search(t)):
        return 3
    if f["max_ratio"] and max(a := length_units(s), b := length_units(t)) > f["max_ratio"] * max(1, min(a, b)):
        return 4
    if f["script_check"] and any(not CJK.search(x) if zh else len(CJK.findall(x)) * 2 > len(x.replace(" ", ""))
                                 for x, zh in zip((s, t), f["zh"])):
        return 5
    return 0


def _pair_key(s: str, t: str) -> int:
    """A 64-bit hash of the pair, for exact-duplicate removal without holding the text."""
    return int.from_bytes(hashlib.blake2b(f"{s}\t{t}".encode(), digest_size=8).digest(), "little", signed=True)


def drop_duplicates(keys, keep, buckets: int = 16) -> int:
    """Clear ``keep`` at every kept row whose pair hash (``keys``, an Arrow column) an earlier kept row
    has; return how many. Hashes go in ``buckets`` groups by their low bits, to sort 1/buckets at a time."""
    dropped = 0
    for b in range(buckets):
        ks, rows, start = [], [], 0
        for chunk in keys.chunks:
            k = chunk.to_numpy()  # (chunk,) int64, zero-copy from the mapped file
            sel = np.flatnonzero(((k & (buckets - 1)) == b) & keep[start : start + len(k)])
            ks.append(k[sel])
            rows.append(sel + start)
            start += len(k)
        k, r = np.concatenate(ks), np.concatenate(rows)  # rows ascending: the first copy sorts first
        order = np.argsort(k, kind="stable")
        k = k[order]
        later = order[1:][k[1:] == k[:-1]]  # (duplicates,) positions in this bucket
        keep[r[later]] = False
        dropped += len(later)
    return dropped


def _clean_batch(batch: dict, f: dict) -> dict:
    src, tgt = (list(map(normalizer(f[f"{side}_opencc"]), batch[side])) for side in ("src", "tgt"))
    return {"src": src, "tgt": tgt, "reason": [_reason(s, t, f) for s, t in zip(src, tgt)],
            "key": [_pair_key(s, t) for s, t in zip(src, tgt)]}


def clean(ds: datasets.Dataset, cfg: DataConfig, split: str, report: Optional[dict] = None) -> datasets.Dataset:
    """Normalize both sides and drop what cannot be a useful pair (``REASONS``; the train split also exact
    duplicates, with ``dedup``), in ``num_workers`` processes; counts are logged and put in ``report[split]``."""
    f = _filter_settings(cfg)
    marked = map_cached(ds, _clean_batch, f"{split}: cleaning", num_workers(cfg, len(ds)),
                        key=json.dumps(f, sort_keys=True) + "|v2", fn_kwargs={"f": f}, remove_columns=ds.column_names,
                        features=CLEAN_FEATURES)
    reason = marked.data.column("reason").to_numpy()  # (pairs,) int8
    counts = {name: int(n) for name, n in zip(REASONS, np.bincount(reason, minlength=len(REASONS) + 1)[1:])}
    keep = reason == 0  # (pairs,) bool
    del reason
    counts["duplicate"] = drop_duplicates(marked.data.column("key"), keep) if cfg.dedup and split == "train" else 0
    out = marked.remove_columns(["reason", "key"])
    if not keep.all():
        out = out.select(np.flatnonzero(keep))
    dropped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) or "none dropped"
    log.info("%s: %d pairs kept of %d (%s)", split, len(out), len(ds), dropped)
    if report is not None:
        report[split] = {"read": len(ds), "kept": len(out), **counts}
    return out
