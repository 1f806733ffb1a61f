"""Where nmt keeps what it can make again: prepared corpora, sentencepiece models, map outputs ($NMT_CACHE)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$NMT_CACHE``, else ``~/.cache/nmt``."""
    return Path(os.environ.get("NMT_CACHE", Path.home() / ".cache" / "nmt"))
