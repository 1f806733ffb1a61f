"""``data=tatoeba``: the packaged Tatoeba cmn-eng corpus (the default), checksummed parquet files."""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import datasets

from nmt.cache import cache_root
from nmt.config import DataConfig
from nmt.data.text import DataError, read_lines

# data/tatoeba in a clone (an editable install maps data/ to nmt.data.packaged), nmt/data/packaged/tatoeba in the wheel
PACKAGED = Path(str(resources.files("nmt.data.packaged") / "tatoeba"))
RESTORE = "reinstall nmt (pip install --force-reinstall nmt), or in a clone `git checkout -- data/tatoeba`"


def _check_packaged(folder: Path) -> dict[str, Path]:
    """The packaged split files, each checked against ``SHA256SUMS`` (a damaged file is named)."""
    sums = folder / "SHA256SUMS"
    if not sums.exists():
        raise DataError(f"the packaged corpus is missing: {sums} not found ({RESTORE})")
    files = {}
    for n, line in enumerate(read_lines(sums), 1):
        digest, _, name = line.partition("  ")
        path = folder / name
        if not path.exists():
            raise DataError(f"{path} is missing ({sums}:{n} lists it); {RESTORE}")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise DataError(f"{path} is damaged: its SHA-256 does not match {sums}:{n} (truncated or altered); "
                            f"{RESTORE}")
        files[path.stem] = path
    return files


def load_tatoeba(cfg: DataConfig) -> datasets.DatasetDict:
    """The packaged Tatoeba cmn-eng pairs (CC BY 2.0 FR): train, dev and a test split that shares no
    sentence with either (see ``data/README.md``), read offline from checksummed parquet files."""
    files = _check_packaged(Path(str(cfg.dir)).expanduser() if cfg.dir else PACKAGED)
    raw = datasets.load_dataset("parquet", data_files={k: str(v) for k, v in files.items()}, cache_dir=str(cache_root() / "hf"))
    return raw.rename_columns({cfg.src_lang: "src", cfg.tgt_lang: "tgt"}).select_columns(["src", "tgt"])
