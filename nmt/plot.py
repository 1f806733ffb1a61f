"""Attention heatmaps (source pieces × target pieces); local modes also show p_t and the window.
Chinese needs a CJK font (``find_cjk_font``): without one, plotting fails with a message, not boxes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np


class PlotError(RuntimeError):
    """Plotting is not possible here (no CJK font); the message says how to fix it."""


_HINTS = ("cjk", "han", "hei", "song", "ming", "wqy", "kai", "fang", "gothic", "droid sans fallback", "unifont")


def _has_glyphs(path: str, text: str = "中文") -> bool:
    from matplotlib.ft2font import FT2Font

    try:
        charmap = FT2Font(path).get_charmap()
    except (OSError, RuntimeError, ValueError):
        return False
    return all(ord(ch) in charmap for ch in text)


@lru_cache(maxsize=1)
def find_cjk_font() -> str:
    """A font that can draw Chinese: ``$NMT_CJK_FONT``, the ``plot`` extra's, or an installed one; else PlotError."""
    if env := os.environ.get("NMT_CJK_FONT"):
        if not Path(env).is_file() or not _has_glyphs(env):
            raise PlotError(f"NMT_CJK_FONT={env} is not a font file with Chinese glyphs")
        return env
    try:
        import cvttf_NotoSansCJK_Regular as pkg  # the `plot` extra

        for f in Path(pkg.__file__).parent.glob("*.otf"):
            return str(f)
    except ImportError:
        pass
    from matplotlib import font_manager

    for entry in font_manager.fontManager.ttflist:
        if any(h in entry.name.lower() or h in Path(entry.fname).name.lower() for h in _HINTS) and _has_glyphs(entry.fname):
            return entry.fname
    raise PlotError("no font with Chinese glyphs found: pip install 'nmt[plot]' (Noto Sans CJK), "
                    "apt-get install fonts-noto-cjk, or set NMT_CJK_FONT=/path/to/font.otf")


def attention_figure(weights: np.ndarray, src_pieces: Sequence[str], tgt_pieces: Sequence[str],
                     centres: Optional[np.ndarray] = None, window: Optional[int] = None, title: str = ""):
    """A heatmap of ``weights`` (tgt_len, src_len); with ``centres`` p_t (tgt_len,) (local modes) also
    p_t as dots and the ``window`` [p_t - D, p_t + D] as two lines."""
    from matplotlib import font_manager
    from matplotlib.figure import Figure

    font = font_manager.FontProperties(fname=find_cjk_font())
    T, S = weights.shape
    fig = Figure(figsize=(max(4, 0.45 * S + 2), max(3, 0.35 * T + 1.5)), dpi=100)
    ax = fig.add_subplot()
    im = ax.imshow(weights, cmap="Greys", vmin=0, vmax=max(float(weights.max()), 1e-6), aspect="auto")
    ax.set_xticks(range(S), list(src_pieces), rotation=90, fontproperties=font)
    ax.set_yticks(range(T), list(tgt_pieces), fontproperties=font)
    ax.set(xlabel="source", ylabel="target")
    if centres is not None:
        rows = np.arange(T)
        ax.plot(centres, rows, "o", color="tab:red", markersize=4, label="p_t")
        if window is not None:
            ax.plot(centres - window, rows, "--", color="tab:blue", linewidth=1, label="p_t ± D")
            ax.plot(centres + window, rows, "--", color="tab:blue", linewidth=1)
        ax.set_xlim(-0.5, S - 0.5)
        ax.legend(loc="lower right", fontsize=7)
    if title:
        ax.set_title(title, fontproperties=font, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    return fig


def figure_array(fig) -> np.ndarray:
    """RGB pixels (height, width, 3) of a figure, for TensorBoard's add_image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def save_png(fig, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).print_png(str(path))
