"""``data=hsk``: the HSK sentences of the PyPI package ``hsk-sentences-audio``, split by a seeded shuffle."""

from __future__ import annotations

import logging
import random

import datasets

from nmt.config import DataConfig
from nmt.data.text import DataError

log = logging.getLogger(__name__)


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
    return datasets.DatasetDict({
        k: datasets.Dataset.from_dict({"src": [s for s, _ in v], "tgt": [t for _, t in v]}) for k, v in parts.items() if v
    })
