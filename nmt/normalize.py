"""Text normalization shared by training and every decoder (PyTorch or ONNX): no heavy imports."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Optional


@lru_cache(maxsize=4)
def _opencc(conversion: str):
    import opencc

    return opencc.OpenCC(f"{conversion}.json" if not conversion.endswith(".json") else conversion)


def normalizer(opencc: Optional[str] = None) -> Callable[[str], str]:
    """The text normalization applied to a side: NFKC, whitespace collapsed, optional OpenCC.

    Training records ``opencc`` in the checkpoint so translate and evaluate apply the same.
    """
    conv = _opencc(opencc) if opencc else None

    def norm(text: str) -> str:
        text = " ".join(unicodedata.normalize("NFKC", text).split())
        return conv.convert(text) if conv is not None else text

    return norm
