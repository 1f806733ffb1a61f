"""Reading UTF-8 text files line by line, and ``DataError``, whose message names the file, line or split."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

SPLITS = ("train", "dev", "test")


class DataError(ValueError):
    """Input data that cannot be used; the message names the file, line or split."""


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file; invalid UTF-8 is an error naming the file and line."""
    return list(iter_lines(path))


def iter_lines(path: Path) -> Iterator[str]:
    """Stream the lines of a UTF-8 text file, without a byte-order mark; invalid UTF-8 names file and line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                yield raw.decode("utf-8-sig" if n == 1 else "utf-8").rstrip("\n").rstrip("\r")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: invalid UTF-8 (byte {e.start} of the line)") from None


def count_lines(path: Path, fields: int = 0) -> int:
    """Lines of a non-empty text file checked in one pass: UTF-8 and, for TSV, ``fields`` fields per row."""
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
    if not n:
        raise DataError(f"{path} is empty")
    return n


def read_parallel(src_path: Path, tgt_path: Path) -> list[tuple[str, str]]:
    """Aligned pairs from two files; an empty file or a line-count mismatch is an error."""
    check_parallel(src_path, tgt_path)
    return list(zip(iter_lines(src_path), iter_lines(tgt_path)))


def check_parallel(src_path: Path, tgt_path: Path) -> None:
    if (n := count_lines(src_path)) != (m := count_lines(tgt_path)):
        raise DataError(f"{src_path} has {n} lines but {tgt_path} has {m}: they diverge at line {min(n, m) + 1}")
