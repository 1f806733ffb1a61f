"""nmt: RNN sequence-to-sequence translation with Luong attention."""

from nmt.version import __version__

__all__ = ["Translator", "__version__"]


def __getattr__(name: str):
    """``from nmt import Translator`` without importing torch for ``import nmt`` (the ONNX runtime does not need it)."""
    if name == "Translator":
        from nmt.translator import Translator

        return Translator
    raise AttributeError(f"module 'nmt' has no attribute {name!r}")
