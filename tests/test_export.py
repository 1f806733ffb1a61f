"""TorchScript export: the scripted greedy loop gives the eager model's output, and a saved file
decodes after a plain ``torch.jit.load`` (no nmt classes needed)."""

from __future__ import annotations

import pytest
import torch

from nmt.batching import make_batch
from nmt.export import export
from nmt.search import greedy
from nmt.tokenizer import EOS


def exported_tokens(out: torch.Tensor) -> list[list[int]]:
    rows = out.tolist()
    return [r[: r.index(EOS)] if EOS in r else r for r in rows]


@pytest.mark.parametrize("rnn_type,mode,input_feeding", [
    ("lstm", "global", True), ("lstm", "local_p", True), ("gru", "local_m", True), ("lstm", "global", False),
])
def test_export_matches_eager_greedy(make_model, random_sources, tmp_path, rnn_type, mode, input_feeding):
    model = make_model(30, 25, mode=mode, window=3, rnn_type=rnn_type, input_feeding=input_feeding)
    sources = random_sources(7, 1, 15, 30, seed=3)
    batch = make_batch(sources, None, range(len(sources)))
    eager = greedy(model, batch).tokens
    ts = export(model)
    assert exported_tokens(ts(batch.src, batch.src_lens)) == eager
    path = tmp_path / "model.ts"
    ts.save(str(path))
    loaded = torch.jit.load(str(path))
    assert exported_tokens(loaded(batch.src, batch.src_lens)) == eager


def test_export_cli(trained_run, run_cli, tmp_path, explain):
    proc = run_cli("nmt.export", trained_run, tmp_path / "out")
    assert proc.returncode == 0, explain(proc)
    for name in ("model.ts", "spm.src.model", "spm.tgt.model"):
        assert (tmp_path / "out" / name).is_file()
    bad = run_cli("nmt.export", tmp_path / "missing.pt", tmp_path / "out2")
    assert bad.returncode == 1 and "nmt.export: error:" in bad.stderr and "Traceback" not in bad.stderr
