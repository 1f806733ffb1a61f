"""nmt: RNN sequence-to-sequence translation with Luong attention."""

__version__ = "0.1.0"
