"""Text normalization shared by training and every decoder (PyTorch or ONNX): no heavy imports."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # the ONNX runtime imports this module without the training stack
    from nmt.config import DataConfig


@lru_cache(maxsize=4)
def _opencc(conversion: str):
    import opencc

    return opencc.OpenCC(f"{conversion}.json" if not conversion.endswith(".json") else conversion)


def normalizer(opencc: Optional[str] = None) -> Callable[[str], str]:
    """The normalization of a side: NFKC, whitespace collapsed, optional OpenCC (recorded in checkpoints)."""
    conv = _opencc(opencc) if opencc else None

    def norm(text: str) -> str:
        text = " ".join(unicodedata.normalize("NFKC", text).split())
        return conv.convert(text) if conv is not None else text

    return norm


def src_normalizer(cfg: DataConfig) -> Callable[[str], str]:
    """Normalization of the source side (OpenCC applies only to a Chinese side)."""
    return normalizer(cfg.opencc if cfg.src_lang.startswith("zh") else None)
