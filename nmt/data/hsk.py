"""``data=hsk``: the HSK sentences of the PyPI package ``hsk-sentences-audio``, split by a seeded shuffle."""

from __future__ import annotations

import logging
import random

import datasets

from nmt.config import DataConfig
from nmt.data.text import DataError

log = logging.getLogger(__name__)


def load_hsk(cfg: DataConfig) -> datasets.DatasetDict:
    """The embedded HSK corpus (zh-en, either way): drop placeholder translations, seeded dev/test/train split."""
    from hsk_sentences_audio import load_sentences

    pairs = [(r["chinese"], r["translation"]["en"]) for r in load_sentences()]
    kept = [p if cfg.src_lang == "zh" else p[::-1] for p in pairs
            if (en := p[1].strip().lower()) not in ("", "ph") and not en.startswith("placeholder")]
    log.info("hsk: %d records, %d with a placeholder translation dropped", len(pairs), len(pairs) - len(kept))
    random.Random(cfg.seed).shuffle(kept)
    n_dev, n_test = cfg.dev_size, cfg.test_size
    if n_dev + n_test >= len(kept):
        raise DataError(f"data.dev_size + data.test_size = {n_dev + n_test} leaves no training pairs")
    parts = {"dev": kept[:n_dev], "test": kept[n_dev : n_dev + n_test], "train": kept[n_dev + n_test :]}
    return datasets.DatasetDict({k: datasets.Dataset.from_dict({"src": [s for s, _ in v], "tgt": [t for _, t in v]})
                                 for k, v in parts.items() if v})
