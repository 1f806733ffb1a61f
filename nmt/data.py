"""Parallel corpora as ``datasets.DatasetDict`` with ``src``/``tgt`` text columns.

Four sources, one result: the packaged Tatoeba corpus (``data/tatoeba``, the default), the HSK
corpus (PyPI ``hsk-sentences-audio``), a folder of aligned plain-text files, or a Hugging Face
dataset with a ``translation`` column. Every pair then goes through the same cleaning, whose
counts are logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Optional

import datasets

from nmt.config import DataConfig
from nmt.normalize import normalizer  # noqa: F401 - re-exported: nmt.data.normalizer

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


class DataError(ValueError):
    """Input data that cannot be used; the message names the file, line or split."""


# --------------------------------------------------------------------------- normalization
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


PACKAGED = Path(__file__).resolve().parents[1] / "data" / "tatoeba"


def _check_packaged(folder: Path) -> dict[str, Path]:
    """The packaged split files, each checked against ``SHA256SUMS`` (a damaged file is named)."""
    sums = folder / "SHA256SUMS"
    if not sums.exists():
        raise DataError(f"the packaged corpus is missing: {sums} not found (run from a clone of the repository, "
                        "or restore it with `git checkout -- data/tatoeba`)")
    files = {}
    for n, line in enumerate(read_lines(sums), 1):
        digest, _, name = line.partition("  ")
        path = folder / name
        if not path.exists():
            raise DataError(f"{path} is missing ({sums}:{n} lists it); restore it with `git checkout -- data/tatoeba`")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise DataError(f"{path} is damaged: its SHA-256 does not match {sums}:{n} (truncated or altered); "
                            "restore it with `git checkout -- data/tatoeba`")
        files[path.stem] = path
    return files


def load_tatoeba(cfg: DataConfig) -> datasets.DatasetDict:
    """The packaged Tatoeba cmn-eng pairs (CC BY 2.0 FR): train, dev and a test split that shares no
    sentence with either (see ``data/README.md``), read offline from checksummed parquet files."""
    if sorted((cfg.src_lang, cfg.tgt_lang)) != ["en", "zh"]:
        raise DataError(f"the tatoeba corpus is zh-en; data.src_lang/tgt_lang={cfg.src_lang}/{cfg.tgt_lang}")
    files = _check_packaged(Path(str(cfg.dir)).expanduser() if cfg.dir else PACKAGED)
    raw = datasets.load_dataset("parquet", data_files={k: str(v) for k, v in files.items()},
                                cache_dir=str(cache_root() / "hf"))
    return datasets.DatasetDict({
        split: ds.rename_columns({cfg.src_lang: "src", cfg.tgt_lang: "tgt"}).select_columns(["src", "tgt"])
        for split, ds in raw.items()
    })


def _to_dataset(pairs: Iterable[tuple[str, str]]) -> datasets.Dataset:
    src, tgt = [], []
    for s, t in pairs:
        src.append(s)
        tgt.append(t)
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt})


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


def iter_lines(path: Path) -> Iterator[str]:
    """Stream the lines of a UTF-8 text file (constant memory); invalid UTF-8 names file and line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield raw.decode("utf-8").rstrip("\n").rstrip("\r")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: invalid UTF-8 (byte {e.start} of the line)") from None


def _count_lines(path: Path, fields: int = 0) -> int:
    """Check a text file in one streaming pass: UTF-8 throughout and, for TSV, ``fields`` fields per row.
    Files over 50 MB show a progress bar with the lines counted."""
    from datasets.utils.tqdm import tqdm

    n = 0
    big = path.exists() and path.stat().st_size > 50_000_000
    with tqdm(unit=" lines", unit_scale=True, desc=f"checking {path.name}", disable=not big) as bar:
        for n, line in enumerate(iter_lines(path), 1):
            if fields and line.count("\t") != fields - 1:
                raise DataError(f"{path}:{n}: expected {fields} tab-separated fields, found {line.count(chr(9)) + 1}")
            if n % 100_000 == 0:
                bar.update(100_000)
        bar.update(n % 100_000)
    return n


def read_parallel(src_path: Path, tgt_path: Path) -> list[tuple[str, str]]:
    """Aligned pairs from two files; an empty file or a line-count mismatch is an error."""
    _check_parallel(src_path, tgt_path)
    return list(zip(iter_lines(src_path), iter_lines(tgt_path)))


def _check_parallel(src_path: Path, tgt_path: Path) -> int:
    counts = [_count_lines(p) for p in (src_path, tgt_path)]
    for path, n in zip((src_path, tgt_path), counts):
        if not n:
            raise DataError(f"{path} is empty")
    if counts[0] != counts[1]:
        raise DataError(
            f"{src_path} has {counts[0]} lines but {tgt_path} has {counts[1]}: "
            f"they diverge at line {min(counts) + 1}"
        )
    return counts[0]


def _check_tsv(path: Path) -> None:
    if not _count_lines(path, fields=2):
        raise DataError(f"{path} is empty")


def _pairs_from_files(src: str, tgt: str, tsv: str, swap: bool) -> Iterator[dict]:
    """Rows for ``Dataset.from_generator``; the files were checked before."""
    if tsv:
        for line in iter_lines(Path(tsv)):
            a, b = line.split("\t")
            yield {"src": b, "tgt": a} if swap else {"src": a, "tgt": b}
    else:
        for s, t in zip(iter_lines(Path(src)), iter_lines(Path(tgt))):
            yield {"src": s, "tgt": t}


def _stream_dataset(
    src: Optional[Path], tgt: Optional[Path], tsv: Optional[Path], check: Callable[[], object], swap: bool = False
) -> datasets.Dataset:
    """An Arrow dataset written from the files without holding them in memory. ``check`` validates
    the files first; both it and the Arrow copy are skipped on a later run while the files' paths,
    sizes and modification times are unchanged (the copy lives under $NMT_CACHE/hf)."""
    stats = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (src, tgt, tsv) if p is not None]
    kwargs = {"src": str(src or ""), "tgt": str(tgt or ""), "tsv": str(tsv or ""), "swap": swap}
    fingerprint = hashlib.sha256(json.dumps([stats, kwargs]).encode()).hexdigest()[:32]
    marker = cache_root() / "hf" / "checked" / fingerprint
    if not marker.exists():
        check()
    ds = datasets.Dataset.from_generator(
        _pairs_from_files, gen_kwargs=kwargs, cache_dir=str(cache_root() / "hf"),
        features=datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")}),
        fingerprint=fingerprint,
    )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return ds


def load_files(cfg: DataConfig) -> datasets.DatasetDict:
    """A folder of ``{split}.{lang}`` files (or ``{split}.tsv``); a split with no file is simply absent.

    Every file is checked in one streaming pass (UTF-8, line counts, TSV fields) before any
    pair is read, then streamed into a memory-mapped Arrow table.
    """
    folder = Path(str(cfg.dir)).expanduser()
    if not folder.is_dir():
        raise DataError(f"data.dir={folder} is not a folder")
    out = {}
    for split in SPLITS:
        if cfg.format == "tsv":
            path = folder / f"{split}.tsv"
            if not path.exists():
                continue
            columns = list(cfg.tsv_columns or [cfg.src_lang, cfg.tgt_lang])
            out[split] = _stream_dataset(None, None, path, lambda p=path: _check_tsv(p), swap=columns[0] != cfg.src_lang)
            continue
        src_path, tgt_path = folder / f"{split}.{cfg.src_lang}", folder / f"{split}.{cfg.tgt_lang}"
        if not src_path.exists() and not tgt_path.exists():
            continue
        for p, other in ((src_path, tgt_path), (tgt_path, src_path)):
            if not p.exists():
                raise DataError(f"{other} exists but {p} is missing")
        out[split] = _stream_dataset(src_path, tgt_path, None, lambda a=src_path, b=tgt_path: _check_parallel(a, b))
    if not out:
        names = "{train,dev,test}.tsv" if cfg.format == "tsv" else f"{{train,dev,test}}.{{{cfg.src_lang},{cfg.tgt_lang}}}"
        raise DataError(f"{folder} has no {names} files")
    return datasets.DatasetDict(out)


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
    for f in sorted(folder.rglob("*")):
        if f.suffix not in LOCAL_FORMATS or not f.is_file():
            continue
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
    """A hub dataset, or a local copy of one, with a ``translation`` column ({lang: text}).

    ``data.splits`` maps our split names to the dataset's; with ``data.holdout`` a dataset that
    has only a train split gives seeded dev/test sets of ``dev_size``/``test_size`` pairs.
    """
    name = str(cfg.name)
    local = Path(name).expanduser()
    if local.is_dir():
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
        if theirs not in raw:
            continue
        ds = raw[theirs]
        if "translation" not in ds.column_names:
            raise DataError(f"dataset {name!r} split {theirs!r} has no 'translation' column: {ds.column_names}")
        langs = [k for k, v in (ds[0]["translation"] if len(ds) else {}).items() if v is not None]
        missing = [lang for lang in (cfg.src_lang, cfg.tgt_lang) if lang not in langs]
        if missing:
            raise DataError(
                f"dataset {name!r} (config {cfg.config!r}) split {theirs!r} has languages {sorted(langs)}, "
                f"not {cfg.src_lang}-{cfg.tgt_lang}"
            )
        out[ours] = map_cached(
            ds, _flatten_translation, f"{ours}: reading {cfg.src_lang}-{cfg.tgt_lang} pairs", batch_size=10_000,
            remove_columns=ds.column_names, fn_kwargs={"src": cfg.src_lang, "tgt": cfg.tgt_lang},
        )
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
    import numpy as np

    order = np.random.default_rng(cfg.seed).permutation(len(train))
    start = 0
    for split, n in want.items():
        out[split] = train.select(np.sort(order[start : start + n]))
        start += n
    out["train"] = train.select(np.sort(order[start:]))
    log.info("held out from train: %s", ", ".join(f"{n} {s}" for s, n in want.items()))
    return out


# --------------------------------------------------------------------------- cleaning
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0/C1 controls left after normalization


def length_units(text: str) -> int:
    """Length comparable across scripts: one unit per CJK character, one per other word."""
    n_cjk = len(CJK.findall(text))
    return n_cjk + len(CJK.sub(" ", text).split())


REASONS = ("empty", "too_long", "control_chars", "length_ratio", "wrong_script")  # codes 1..5; 0 = kept


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
    if f["script_check"] and any(
        (is_zh and not CJK.search(x)) or (not is_zh and len(CJK.findall(x)) * 2 > len(x.replace(" ", "")))
        for x, is_zh in ((s, f["zh"][0]), (t, f["zh"][1]))
    ):
        return 5
    return 0


def _pair_key(s: str, t: str) -> int:
    """A 64-bit hash of the pair, for exact-duplicate removal without holding the text."""
    return int.from_bytes(hashlib.blake2b(f"{s}\t{t}".encode(), digest_size=8).digest(), "little", signed=True)


CLEAN_FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string"),
                                    "reason": datasets.Value("int8"), "key": datasets.Value("int64")})


def _drop_duplicates(keys, keep, buckets: int = 16) -> int:
    """Clear ``keep`` at every kept row whose pair hash an earlier kept row has; return how many.

    ``keys`` is the Arrow column of hashes (memory-mapped). Hashes are split by their low bits
    into ``buckets`` groups handled one at a time, so the sorting memory is 1/buckets of
    the corpus's: about 3 bytes a pair at the peak besides ``keep`` itself.
    """
    import numpy as np

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
    ns, nt = normalizer(f["src_opencc"]), normalizer(f["tgt_opencc"])
    src = [ns(x) for x in batch["src"]]
    tgt = [nt(x) for x in batch["tgt"]]
    return {"src": src, "tgt": tgt, "reason": [_reason(s, t, f) for s, t in zip(src, tgt)],
            "key": [_pair_key(s, t) for s, t in zip(src, tgt)]}


def num_workers(cfg: DataConfig, rows: int) -> Optional[int]:
    """Processes for ``Dataset.map``: data.num_proc, or one per core for corpora over 50k pairs."""
    if cfg.num_proc:
        n = cfg.num_proc
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        n = cores if rows > 50_000 else 1
    return n if n > 1 and rows > n else None


def map_cached(
    ds: datasets.Dataset, fn: Callable, desc: str, num_proc: Optional[int] = None, key: str = "", **kw
) -> datasets.Dataset:
    """``Dataset.map`` with a progress bar (``desc``) whose Arrow output goes under $NMT_CACHE/hf
    (never next to a user's dataset copy), named by the input's fingerprint and ``key`` (the settings)."""
    batch_size = kw.pop("batch_size", 2000)
    if not ds.cache_files:  # an in-memory table (a small corpus) stays in memory
        return ds.map(fn, batched=True, batch_size=batch_size, num_proc=num_proc, keep_in_memory=True, desc=desc, **kw)
    folder = cache_root() / "hf" / "map"
    folder.mkdir(parents=True, exist_ok=True)
    fingerprint = hashlib.sha256(f"{ds._fingerprint}|{desc}|{key}".encode()).hexdigest()[:32]
    return ds.map(fn, batched=True, batch_size=batch_size, num_proc=num_proc,
                  cache_file_name=str(folder / f"{fingerprint}.arrow"), new_fingerprint=fingerprint, desc=desc, **kw)


def clean(
    ds: datasets.Dataset, cfg: DataConfig, split: str, report: Optional[dict] = None, num_proc: Optional[int] = None
) -> datasets.Dataset:
    """Normalize both sides and drop what cannot be a useful pair, counting each reason.

    Every split: empty sides, sides over ``max_chars``, control characters, a length ratio
    over ``max_ratio``, and (with ``script_check``) a Chinese side without CJK or a
    non-Chinese side that is mostly CJK. The train split also loses exact duplicate pairs
    (``dedup``, by a 64-bit hash per pair, in 16 buckets). Runs in ``num_proc`` processes
    (default: ``num_workers``); counts are logged and added to ``report[split]``.
    """
    import numpy as np

    f = _filter_settings(cfg)
    workers = num_proc if num_proc is not None else num_workers(cfg, len(ds))
    marked = map_cached(ds, _clean_batch, f"{split}: cleaning", workers, key=json.dumps(f, sort_keys=True) + "|v2",
                        fn_kwargs={"f": f}, remove_columns=ds.column_names, features=CLEAN_FEATURES)
    reason = marked.data.column("reason").to_numpy()  # (pairs,) int8
    counts = {name: int(n) for name, n in zip(REASONS, np.bincount(reason, minlength=len(REASONS) + 1)[1:])}
    keep = reason == 0  # (pairs,) bool
    del reason
    counts["duplicate"] = _drop_duplicates(marked.data.column("key"), keep) if cfg.dedup and split == "train" else 0
    out = marked.remove_columns(["reason", "key"])
    if not keep.all():
        out = out.select(np.flatnonzero(keep))
    dropped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) or "none dropped"
    log.info("%s: %d pairs kept of %d (%s)", split, len(out), len(ds), dropped)
    if report is not None:
        report[split] = {"read": len(ds), "kept": len(out), **counts}
    return out


def load_raw(cfg: DataConfig) -> datasets.DatasetDict:
    """The corpus as read, before cleaning: ``src``/``tgt`` text columns per split."""
    loaders = {"tatoeba": load_tatoeba, "hsk": load_hsk, "files": load_files, "hub": load_hub}
    return loaders[cfg.source](cfg)


def load_corpus(
    cfg: DataConfig, need: Iterable[str] = ("train", "dev"), report: Optional[dict] = None,
    splits: Optional[Iterable[str]] = None,
) -> datasets.DatasetDict:
    """Load, clean, and check that every split in ``need`` is present and non-empty; the
    cleaning counts per split go into ``report`` when one is given. ``splits`` limits the
    cleaning to those splits (evaluation of a test set need not clean a large train split)."""
    raw = load_raw(cfg)
    wanted = set(splits) if splits is not None else set(raw)
    out = datasets.DatasetDict({k: clean(v, cfg, k, report) for k, v in raw.items() if k in wanted})
    for split in need:
        if split not in out:
            where = cfg.dir or cfg.name or cfg.source
            raise DataError(f"corpus {where} has no {split!r} split, which is needed here")
        if len(out[split]) == 0:
            raise DataError(f"split {split!r} is empty after cleaning")
    return out


def cache_root() -> Path:
    return Path(os.environ.get("NMT_CACHE", Path.home() / ".cache" / "nmt"))
