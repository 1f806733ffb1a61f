"""``data=files``: a folder of aligned ``{split}.{lang}`` files or ``{split}.tsv``, streamed into Arrow."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import datasets

from nmt.cache import cache_root
from nmt.config import DataConfig
from nmt.data.text import SPLITS, DataError, check_parallel, count_lines, iter_lines


def _pairs_from_files(src: str, tgt: str, tsv: str, swap: bool) -> Iterator[dict]:
    """Rows for ``Dataset.from_generator``; the files were checked before."""
    pairs = (line.split("\t") for line in iter_lines(Path(tsv))) if tsv else zip(iter_lines(Path(src)), iter_lines(Path(tgt)))
    for a, b in pairs:
        yield {"src": b, "tgt": a} if swap else {"src": a, "tgt": b}


def _stream_dataset(src: Optional[Path], tgt: Optional[Path], tsv: Optional[Path], check: Callable[[], object],
                    swap: bool = False) -> datasets.Dataset:
    """An Arrow dataset streamed from the files, after ``check``; both are skipped while the files' paths,
    sizes and modification times are unchanged (the copy lives under $NMT_CACHE/hf)."""
    stats = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (src, tgt, tsv) if p is not None]
    kwargs = {"src": str(src or ""), "tgt": str(tgt or ""), "tsv": str(tsv or ""), "swap": swap}
    fingerprint = hashlib.sha256(json.dumps([stats, kwargs]).encode()).hexdigest()[:32]
    marker = cache_root() / "hf" / "checked" / fingerprint
    if not marker.exists():
        check()
    ds = datasets.Dataset.from_generator(_pairs_from_files, gen_kwargs=kwargs, cache_dir=str(cache_root() / "hf"),
                                         features=datasets.Features(dict.fromkeys(("src", "tgt"), datasets.Value("string"))),
                                         fingerprint=fingerprint)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return ds


def load_files(cfg: DataConfig) -> datasets.DatasetDict:
    """A folder of ``{split}.{lang}`` files (or ``{split}.tsv``), each checked (UTF-8, line counts, TSV fields)
    and streamed into a memory-mapped Arrow table; a split with no file is absent."""
    folder = Path(str(cfg.dir)).expanduser()
    if not folder.is_dir():
        where = "" if folder.is_absolute() else f" (relative to the current folder, {Path.cwd()})"
        raise DataError(f"data.dir={folder} is not a folder{where}")
    out = {}
    swap = (cfg.tsv_columns or [cfg.src_lang])[0] != cfg.src_lang
    for split in SPLITS:
        tsv, src, tgt = (folder / f"{split}.{ext}" for ext in ("tsv", cfg.src_lang, cfg.tgt_lang))
        if cfg.format == "tsv" and tsv.exists():
            out[split] = _stream_dataset(None, None, tsv, lambda p=tsv: count_lines(p, fields=2), swap=swap)
        elif cfg.format == "text" and (src.exists() or tgt.exists()):
            for p, other in ((src, tgt), (tgt, src)):
                if not p.exists():
                    raise DataError(f"{other} exists but {p} is missing")
            out[split] = _stream_dataset(src, tgt, None, lambda a=src, b=tgt: check_parallel(a, b))
    if not out:
        names = "{train,dev,test}.tsv" if cfg.format == "tsv" else f"{{train,dev,test}}.{{{cfg.src_lang},{cfg.tgt_lang}}}"
        raise DataError(f"{folder} has no {names} files")
    return datasets.DatasetDict(out)
