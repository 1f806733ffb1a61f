"""``data=files``: a folder of aligned ``{split}.{lang}`` files or ``{split}.tsv``, streamed into Arrow."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import datasets

from nmt.config import DataConfig
from nmt.data.cache import cache_root
from nmt.data.text import SPLITS, DataError, check_parallel, count_lines, iter_lines


def _pairs_from_files(src: str, tgt: str, tsv: str, swap: bool) -> Iterator[dict]:
    """Rows for ``Dataset.from_generator``; the files were checked before."""
    if tsv:
        for line in iter_lines(Path(tsv)):
            a, b = line.split("\t")
            yield {"src": b, "tgt": a} if swap else {"src": a, "tgt": b}
    else:
        for s, t in zip(iter_lines(Path(src)), iter_lines(Path(tgt))):
            yield {"src": s, "tgt": t}


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
    ds = datasets.Dataset.from_generator(
        _pairs_from_files, gen_kwargs=kwargs, cache_dir=str(cache_root() / "hf"),
        features=datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")}),
        fingerprint=fingerprint,
    )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return ds


def load_files(cfg: DataConfig) -> datasets.DatasetDict:
    """A folder of ``{split}.{lang}`` files (or ``{split}.tsv``), each checked (UTF-8, line counts, TSV fields)
    and streamed into a memory-mapped Arrow table; a split with no file is absent."""
    folder = Path(str(cfg.dir)).expanduser()
    if not folder.is_dir():
        raise DataError(f"data.dir={folder} is not a folder")
    out = {}
    for split in SPLITS:
        if cfg.format == "tsv":
            path = folder / f"{split}.tsv"
            if not path.exists():
                continue
            swap = (cfg.tsv_columns or [cfg.src_lang])[0] != cfg.src_lang
            out[split] = _stream_dataset(None, None, path, lambda p=path: count_lines(p, fields=2), swap=swap)
            continue
        src_path, tgt_path = folder / f"{split}.{cfg.src_lang}", folder / f"{split}.{cfg.tgt_lang}"
        if not src_path.exists() and not tgt_path.exists():
            continue
        for p, other in ((src_path, tgt_path), (tgt_path, src_path)):
            if not p.exists():
                raise DataError(f"{other} exists but {p} is missing")
        out[split] = _stream_dataset(src_path, tgt_path, None, lambda a=src_path, b=tgt_path: check_parallel(a, b))
    if not out:
        names = "{train,dev,test}.tsv" if cfg.format == "tsv" else f"{{train,dev,test}}.{{{cfg.src_lang},{cfg.tgt_lang}}}"
        raise DataError(f"{folder} has no {names} files")
    return datasets.DatasetDict(out)
