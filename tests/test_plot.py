"""Attention you can see: heatmaps with readable Chinese, p_t and the window for local modes,
hard alignments as text, and TensorBoard images during training."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.plot import PlotError, attention_figure, figure_array, find_cjk_font

SENTENCES = ["老师，您好！", "", "图书馆在学校里边。"]


def test_a_cjk_font_is_found_and_draws_chinese():
    from matplotlib.ft2font import FT2Font

    charmap = FT2Font(find_cjk_font()).get_charmap()
    assert all(ord(c) in charmap for c in "图书馆在学校里边")


def test_local_figure_has_centres_and_window():
    w = np.random.default_rng(0).random((4, 6))
    fig = attention_figure(w, list("图书馆在学校"), ["▁The", "▁library", ".", "</s>"], np.array([0.5, 1.5, 3, 4.5]), 2)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3  # p_t dots and the two window edges
    assert list(lines[0].get_xdata()) == [0.5, 1.5, 3, 4.5]
    img = figure_array(fig)
    assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.uint8


def test_missing_font_is_a_clear_error(monkeypatch, tmp_path):
    find_cjk_font.cache_clear()
    monkeypatch.setenv("NMT_CJK_FONT", str(tmp_path / "none.ttf"))
    with pytest.raises(PlotError, match="NMT_CJK_FONT"):
        find_cjk_font()
    find_cjk_font.cache_clear()


def test_translate_plots_and_prints_attention(trained_run, run_cli, tmp_path, explain):
    """--print-attention pairs each target piece j with the source piece i it attended most: the argmax of the API's
    attention over the same translation, row by row."""
    from nmt import Translator

    out = tmp_path / "plots"
    proc = run_cli("nmt.translate", trained_run, *SENTENCES, "--beam", "2", "--plot-attention", out,
                   "--print-attention")
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    assert len(lines) == len(SENTENCES)
    api = Translator.load(trained_run, "cpu")
    for k in (0, 2):
        hyp, pairs = lines[k].split(" ||| ")
        assert hyp == api.translate([SENTENCES[k]], beam=2)[0].text
        weights = api.attention(SENTENCES[k], hyp).weights  # (target pieces + </s>, source pieces)
        expected = [f"{np.argmax(row)}-{j}" for j, row in enumerate(weights[:-1])]  # </s> has no pair
        assert pairs.split() == expected and expected
    assert lines[1] == " ||| "
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["000000.png", "000001.png", "000002.png"]  # the empty line too: its </s> row
    assert (out / "000000.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_translate_without_a_font_fails_before_translating(trained_run, run_cli, tmp_path, cli_env):
    import subprocess
    import sys

    env = dict(cli_env, NMT_CJK_FONT=str(tmp_path / "missing.otf"))
    proc = subprocess.run([sys.executable, "-m", "nmt.translate", str(trained_run), "你好", "--plot-attention",
                           str(tmp_path / "p")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "nmt.translate: error: NMT_CJK_FONT" in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_training_writes_attention_images(trained_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()  # the hparams summary writes a second events file: look in every one
    for events in (trained_run / "tensorboard").glob("events.*"):
        acc = EventAccumulator(str(events), size_guidance={"images": 0})
        acc.Reload()
        tags |= set(acc.Tags()["images"])
    assert {"attention/dev0", "attention/dev1", "attention/dev2"} <= tags
