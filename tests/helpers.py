"""Plain helpers shared by several test files (fixtures live in ``conftest.py``): no test file imports another.

Import them as ``from helpers import ...`` (pytest puts ``tests/`` on the path, as it does for ``conftest.py``).
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import torch
from omegaconf import DictConfig, OmegaConf

from nmt import checkpoint
from nmt.config import TrainConfig

# The tiny CLI run of the resume, DDP and defaults tests: the embedded HSK corpus, a 1-layer 32-unit model, no test
# split decoding. Append overrides to change it.
BASE = [
    "data=hsk", "model.emb_size=32", "model.hidden_size=32", "model.encoder_layers=1", "model.decoder_layers=1",
    "tokenizer.src_vocab_size=2000", "tokenizer.tgt_vocab_size=500", "data.dev_size=100", "data.test_size=100",
    "trainer.device=cpu", "trainer.threads=1", "trainer.max_minutes=0", "trainer.test_beam=0",
    "trainer.batch_tokens=400", "trainer.valid_max_sentences=20",
]

DIGITS = range(4, 14)  # ten "digit" tokens after the four specials


def digit_strings(n: int, seed: int, lo: int = 3, hi: int = 8) -> list[list[int]]:
    """``n`` seeded strings of 3 to 8 (``lo`` to ``hi``) digit token ids."""
    rng = random.Random(seed)
    return [[rng.choice(DIGITS) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def digits_cfg(data_dir: Path, **trainer) -> DictConfig:
    """The typed config of a 32-unit model learning the digits corpus in ``data_dir`` (the ``digits_dir`` fixture);
    ``trainer`` settings go on top of the test defaults."""
    cfg = OmegaConf.structured(TrainConfig)
    cfg.data.source, cfg.data.dir = "files", str(data_dir)
    cfg.data.dedup = False  # short random digit strings repeat; the learning tests were sized with them
    cfg.tokenizer.model_type, cfg.tokenizer.src_vocab_size, cfg.tokenizer.tgt_vocab_size = "word", 20, 20
    m = cfg.model
    m.emb_size, m.hidden_size, m.encoder_layers, m.decoder_layers, m.dropout = 32, 32, 1, 1, 0.0
    defaults = dict(device="cpu", lr=0.01, batch_tokens=400, test_beam=2, log_every=50)
    cfg.trainer = OmegaConf.merge(cfg.trainer, {**defaults, **trainer})
    return cfg


def checkpoint_weights(path: Path) -> dict[str, torch.Tensor]:
    """The model weights saved in the checkpoint at ``path``."""
    return checkpoint.load(path)["model"]


def export_cfg(mode: str, window: int) -> SimpleNamespace:
    """The parts of a training config that ``export_onnx`` reads: general attention of ``mode`` and ``window``."""
    attention = SimpleNamespace(score="general", mode=mode, window=window)
    return SimpleNamespace(model=SimpleNamespace(attention=attention),
                           data=SimpleNamespace(src_lang="zh", tgt_lang="en", opencc=None))
