"""Parallel corpora as ``datasets.DatasetDict`` with ``src``/``tgt`` text columns.

Three sources, one result: the embedded HSK corpus (PyPI ``hsk-sentences-audio``), a folder
of aligned plain-text files, or a Hugging Face dataset with a ``translation`` column. Every
pair then goes through the same cleaning, whose counts are logged.
"""

from __future__ import annotations

import logging
import os
import random
import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Optional

import datasets

from nmt.config import DataConfig

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


class DataError(ValueError):
    """Input data that cannot be used; the message names the file, line or split."""


# --------------------------------------------------------------------------- normalization
@lru_cache(maxsize=4)
def _opencc(conversion: str):
    import opencc

    return opencc.OpenCC(f"{conversion}.json" if not conversion.endswith(".json") else conversion)


def normalizer(opencc: Optional[str] = None) -> Callable[[str], str]:
    """The text normalization applied to a side: NFKC, whitespace collapsed, optional OpenCC.

    Training records ``opencc`` in the checkpoint so translate and evaluate apply the same.
    """
    conv = _opencc(opencc) if opencc else None

    def norm(text: str) -> str:
        text = " ".join(unicodedata.normalize("NFKC", text).split())
        return conv.convert(text) if conv is not None else text

    return norm


def src_normalizer(cfg: DataConfig) -> Callable[[str], str]:
    """Normalization of the source side (OpenCC applies only to a Chinese side)."""
    return normalizer(cfg.opencc if cfg.src_lang.startswith("zh") else None)


def tgt_normalizer(cfg: DataConfig) -> Callable[[str], str]:
    return normalizer(cfg.opencc if cfg.tgt_lang.startswith("zh") else None)


# --------------------------------------------------------------------------- sources
def _is_placeholder(en: str) -> bool:
    s = en.strip().lower()
    return s.startswith("placeholder") or s == "ph" or not s


def load_hsk(cfg: DataConfig) -> datasets.DatasetDict:
    """The embedded HSK corpus: drop placeholder translations, seeded dev/test/train split."""
    from hsk_sentences_audio import load_sentences

    if (cfg.src_lang, cfg.tgt_lang) not in (("zh", "en"), ("en", "zh")):
        raise DataError(f"the hsk corpus is zh-en; data.src_lang/tgt_lang={cfg.src_lang}/{cfg.tgt_lang}")
    records = load_sentences()
    pairs = [(r["chinese"], r["translation"]["en"]) for r in records]
    kept = [(zh, en) for zh, en in pairs if not _is_placeholder(en)]
    log.info("hsk: %d records, %d with a placeholder translation dropped", len(pairs), len(pairs) - len(kept))
    if cfg.src_lang == "en":
        kept = [(en, zh) for zh, en in kept]
    random.Random(cfg.seed).shuffle(kept)
    n_dev, n_test = cfg.dev_size, cfg.test_size
    if n_dev + n_test >= len(kept):
        raise DataError(f"data.dev_size + data.test_size = {n_dev + n_test} leaves no training pairs")
    parts = {"dev": kept[:n_dev], "test": kept[n_dev : n_dev + n_test], "train": kept[n_dev + n_test :]}
    return datasets.DatasetDict({k: _to_dataset(v) for k, v in parts.items() if v})


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file; invalid UTF-8 is an error naming the file and line."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark is not text
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: invalid UTF-8 (byte {e.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def read_parallel(src_path: Path, tgt_path: Path) -> list[tuple[str, str]]:
    """Aligned pairs from two files; an empty file or a line-count mismatch is an error."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        if not lines:
            raise DataError(f"{path} is empty")
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
            f"they diverge at line {min(len(src), len(tgt)) + 1}"
        )
    return list(zip(src, tgt))


def load_files(cfg: DataConfig) -> datasets.DatasetDict:
    """A folder of ``{split}.{lang}`` files; a split with neither file is simply absent."""
    folder = Path(str(cfg.dir)).expanduser()
    if not folder.is_dir():
        raise DataError(f"data.dir={folder} is not a folder")
    out = {}
    for split in SPLITS:
        src_path, tgt_path = folder / f"{split}.{cfg.src_lang}", folder / f"{split}.{cfg.tgt_lang}"
        if not src_path.exists() and not tgt_path.exists():
            continue
        for p, other in ((src_path, tgt_path), (tgt_path, src_path)):
            if not p.exists():
                raise DataError(f"{other} exists but {p} is missing")
        out[split] = _to_dataset(read_parallel(src_path, tgt_path))
    if not out:
        raise DataError(f"{folder} has no {{train,dev,test}}.{{{cfg.src_lang},{cfg.tgt_lang}}} files")
    return datasets.DatasetDict(out)


def load_hub(cfg: DataConfig) -> datasets.DatasetDict:
    """A hub dataset (or a local ``save_to_disk`` copy) with a ``translation`` column."""
    name = str(cfg.name)
    if Path(name).expanduser().is_dir() and (
        (Path(name).expanduser() / "dataset_dict.json").exists()
    ):
        raw = datasets.load_from_disk(str(Path(name).expanduser()))
    else:
        try:
            raw = datasets.load_dataset(name, cfg.config)
        except Exception as e:  # the hub and the loader raise many kinds; keep the message
            raise DataError(f"cannot load dataset {name!r} (config {cfg.config!r}): {e}") from None
    out = {}
    for ours, theirs in cfg.splits.items():
        if ours not in SPLITS:
            raise DataError(f"data.splits key {ours!r} is not one of {', '.join(SPLITS)}")
        if theirs not in raw:
            continue
        ds = raw[theirs]
        if "translation" not in ds.column_names:
            raise DataError(f"dataset {name!r} split {theirs!r} has no 'translation' column: {ds.column_names}")
        first = ds[0]["translation"] if len(ds) else {}
        missing = [lang for lang in (cfg.src_lang, cfg.tgt_lang) if lang not in first]
        if missing:
            raise DataError(
                f"dataset {name!r} has languages {sorted(first)}, not {cfg.src_lang}-{cfg.tgt_lang}"
            )
        out[ours] = _to_dataset((t[cfg.src_lang], t[cfg.tgt_lang]) for t in ds["translation"])
    if not out:
        raise DataError(f"dataset {name!r} has none of the splits {list(cfg.splits.values())}: {list(raw)}")
    return datasets.DatasetDict(out)


def _to_dataset(pairs: Iterable[tuple[str, str]]) -> datasets.Dataset:
    src, tgt = [], []
    for s, t in pairs:
        src.append(s)
        tgt.append(t)
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt})


# --------------------------------------------------------------------------- cleaning
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0/C1 controls left after normalization


def length_units(text: str) -> int:
    """Length comparable across scripts: one unit per CJK character, one per other word."""
    n_cjk = len(CJK.findall(text))
    return n_cjk + len(CJK.sub(" ", text).split())


def clean(ds: datasets.Dataset, cfg: DataConfig, split: str, report: Optional[dict] = None) -> datasets.Dataset:
    """Normalize both sides and drop what cannot be a useful pair, counting each reason.

    Every split: empty sides, sides over ``max_chars``, control characters, a length ratio
    over ``max_ratio``, and (with ``script_check``) a Chinese side without CJK or a
    non-Chinese side that is mostly CJK. The train split also loses exact duplicate pairs
    (``dedup``). Counts are logged and added to ``report[split]``.
    """
    ns, nt = src_normalizer(cfg), tgt_normalizer(cfg)
    zh = [lang.startswith("zh") for lang in (cfg.src_lang, cfg.tgt_lang)]
    counts = dict.fromkeys(("empty", "too_long", "control_chars", "length_ratio", "wrong_script", "duplicate"), 0)
    seen: set[tuple[str, str]] = set()
    src, tgt = [], []
    for s, t in zip(ds["src"], ds["tgt"]):
        s, t = ns(s), nt(t)
        if not s or not t:
            counts["empty"] += 1
        elif len(s) > cfg.max_chars or len(t) > cfg.max_chars:
            counts["too_long"] += 1
        elif cfg.drop_control and (CONTROL.search(s) or CONTROL.search(t)):
            counts["control_chars"] += 1
        elif cfg.max_ratio and max(a := length_units(s), b := length_units(t)) > cfg.max_ratio * max(1, min(a, b)):
            counts["length_ratio"] += 1
        elif cfg.script_check and any(
            (is_zh and not CJK.search(x)) or (not is_zh and len(CJK.findall(x)) * 2 > len(x.replace(" ", "")))
            for x, is_zh in ((s, zh[0]), (t, zh[1]))
        ):
            counts["wrong_script"] += 1
        elif cfg.dedup and split == "train" and (s, t) in seen:
            counts["duplicate"] += 1
        else:
            if cfg.dedup and split == "train":
                seen.add((s, t))
            src.append(s)
            tgt.append(t)
    dropped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) or "none dropped"
    log.info("%s: %d pairs kept of %d (%s)", split, len(src), len(ds), dropped)
    if report is not None:
        report[split] = {"read": len(ds), "kept": len(src), **counts}
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt})


def load_corpus(
    cfg: DataConfig, need: Iterable[str] = ("train", "dev"), report: Optional[dict] = None
) -> datasets.DatasetDict:
    """Load, clean, and check that every split in ``need`` is present and non-empty; the
    cleaning counts per split go into ``report`` when one is given."""
    loaders = {"hsk": load_hsk, "files": load_files, "hub": load_hub}
    raw = loaders[cfg.source](cfg)
    out = datasets.DatasetDict({k: clean(v, cfg, k, report) for k, v in raw.items()})
    for split in need:
        if split not in out:
            where = cfg.dir or cfg.name or cfg.source
            raise DataError(f"corpus {where} has no {split!r} split, which is needed here")
        if len(out[split]) == 0:
            raise DataError(f"split {split!r} is empty after cleaning")
    return out


def cache_root() -> Path:
    return Path(os.environ.get("NMT_CACHE", Path.home() / ".cache" / "nmt"))
