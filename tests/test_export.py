"""ONNX export: the onnxruntime decoder (numpy greedy and beam search) gives the eager model's
output, and the exported folder translates and serves in a process where importing torch fails."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import export_cfg

from nmt.batching import make_batch
from nmt.export_onnx import export_onnx
from nmt.onnx_runtime import STOPS as RUNTIME_STOPS
from nmt.onnx_runtime import OnnxTranslator
from nmt.search import STOPS, beam_search, greedy
from nmt.translator import SearchSettings
from nmt.vocab import EOS

NO_TORCH = "import sys; sys.modules['torch'] = None\n"  # any 'import torch' now raises ImportError


@pytest.mark.parametrize("rnn_type,mode,input_feeding,layers,bidirectional", [
    ("lstm", "local_p", True, 2, True), ("lstm", "global", False, 1, False), ("gru", "local_m", True, 1, True),
])
def test_onnx_matches_eager(make_model, random_sources, hsk_tokenizer, tmp_path, rnn_type, mode, input_feeding,
                            layers, bidirectional):
    model = make_model(40, 30, mode=mode, window=3, rnn_type=rnn_type, input_feeding=input_feeding,
                       encoder_layers=layers, decoder_layers=layers, bidirectional=bidirectional)
    with torch.no_grad():  # peaked output distributions: an untrained model's near-ties would make the order arbitrary
        model.decoder.out.weight.mul_(30)
        model.decoder.out.bias.mul_(30)
    export_onnx(model, hsk_tokenizer, export_cfg(mode, 3), tmp_path)
    onnx = OnnxTranslator(tmp_path)
    sources = random_sources(9, 1, 15, 40, seed=3)
    batch = make_batch(sources, None, range(len(sources)))
    assert [toks for toks, _ in onnx.greedy(sources)] == greedy(model, batch).tokens
    eager = beam_search(model, batch, beam=4, n_best=2)
    ours = onnx.beam(sources, 4, n_best=2)
    assert [[toks for toks, _ in nb] for nb in ours] == [[toks for toks, _ in nb] for nb in eager.nbest]
    np.testing.assert_allclose([s for nb in ours for _, s in nb], [s for nb in eager.nbest for _, s in nb], atol=1e-4)


def test_the_step_takes_each_sentences_source_once_and_older_exports_still_decode(make_model, random_sources,
                                                                                hsk_tokenizer, tmp_path):
    """A beam's hypotheses share their sentence's source in the runtime, as in nmt.search; a folder whose meta.json
    does not say ``shared_source`` (exported before it) gets a source row per state row, with the same output."""
    model = make_model(40, 30, mode="local_p", window=3)
    with torch.no_grad():
        model.decoder.out.weight.mul_(30)
        model.decoder.out.bias.mul_(30)
    export_onnx(model, hsk_tokenizer, export_cfg("local_p", 3), tmp_path)
    sources = random_sources(7, 1, 15, 40, seed=5)
    onnx = OnnxTranslator(tmp_path)
    st = onnx.select(onnx.encode(sources), np.repeat(np.arange(7), 3))
    assert onnx.shared and st["memory"].shape[0] == st["keys"].shape[0] == 7 and st["h"].shape[1] == st["feed"].shape[0] == 21
    meta = json.loads((tmp_path / "meta.json").read_text())
    del meta["shared_source"]
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    older = OnnxTranslator(tmp_path)
    assert not older.shared and older.select(older.encode(sources), np.repeat(np.arange(7), 3))["memory"].shape[0] == 21
    for a, b in ((older.beam(sources, 3, n_best=2, stop="first"), onnx.beam(sources, 3, n_best=2, stop="first")),
                 ([[h] for h in older.greedy(sources)], [[h] for h in onnx.greedy(sources)])):
        assert [[toks for toks, _ in nb] for nb in a] == [[toks for toks, _ in nb] for nb in b]
        np.testing.assert_allclose([s for nb in a for _, s in nb], [s for nb in b for _, s in nb], atol=1e-5)  # bmm rounding
    batch = make_batch(sources, None, range(len(sources)))
    assert [nb[0][0] for nb in onnx.beam(sources, 3)] == beam_search(model, batch, beam=3).tokens


@pytest.fixture
def torch_tanh(monkeypatch):
    """The fast engine's eager maths with torch's tanh, as the exported graphs compute it (nmt/engine/pointwise.py)."""
    monkeypatch.setattr("nmt.engine.pointwise.fast", lambda x: False)


@pytest.mark.parametrize("stop", STOPS)
def test_onnx_follows_every_stop_rule(make_model, random_sources, hsk_tokenizer, tmp_path, stop, torch_tanh):
    """Each stop rule of the eager search (nmt.search.STOPS), n-best included, in the runtime; its STOPS and default
    are the eager side's."""
    assert RUNTIME_STOPS == STOPS
    assert inspect.signature(OnnxTranslator.beam).parameters["stop"].default == SearchSettings().stop
    model = make_model(40, 30, mode="local_p", window=3)
    with torch.no_grad():  # peaked outputs, and an EOS that leads in some states: the three rules part ways
        model.decoder.out.weight.mul_(10)
        model.decoder.out.bias.mul_(10)
        model.decoder.out.weight[EOS] *= 100
        model.decoder.out.bias[EOS] = 1.5
    export_onnx(model, hsk_tokenizer, export_cfg("local_p", 3), tmp_path)
    onnx = OnnxTranslator(tmp_path)
    sources = random_sources(12, 1, 15, 40, seed=5)
    batch = make_batch(sources, None, range(len(sources)))
    by_rule = {s: beam_search(model, batch, beam=4, n_best=3, alpha=0.6, stop=s).nbest for s in STOPS}
    assert len({str(nbest) for nbest in by_rule.values()}) == len(STOPS), "the rules must give different n-bests here"
    eager, ours = by_rule[stop], onnx.beam(sources, 4, 0.6, 3, stop)
    assert [[toks for toks, _ in nb] for nb in ours] == [[toks for toks, _ in nb] for nb in eager]
    np.testing.assert_allclose([s for nb in ours for _, s in nb], [s for nb in eager for _, s in nb], atol=1e-4)
    with pytest.raises(ValueError, match="'last'"):
        onnx.beam(sources, 4, stop="last")


def test_onnx_follows_the_coverage_penalty(make_model, random_sources, hsk_tokenizer, tmp_path, torch_tanh):
    """``beta`` (the GNMT coverage penalty) in the runtime gives the eager search's n-best lists and scores, on a
    model where it changes them, at beam 1 too (a beam search there, not greedy, as eager)."""
    model = make_model(40, 30, mode="global")
    with torch.no_grad():  # peaked outputs: no near-ties for float rounding to flip
        model.decoder.out.weight.mul_(30)
        model.decoder.out.bias.mul_(30)
    export_onnx(model, hsk_tokenizer, export_cfg("global", 3), tmp_path)
    onnx = OnnxTranslator(tmp_path)
    sources = random_sources(12, 1, 15, 40, seed=5)
    batch = make_batch(sources, None, range(len(sources)))
    plain = beam_search(model, batch, beam=4, n_best=3, alpha=0.6).nbest
    for beam, n_best in ((4, 3), (1, 1)):
        eager = beam_search(model, batch, beam=beam, n_best=n_best, alpha=0.6, beta=0.5).nbest
        ours = onnx.beam(sources, beam, 0.6, n_best, "full", beta=0.5)
        assert [[toks for toks, _ in nb] for nb in ours] == [[toks for toks, _ in nb] for nb in eager]
        np.testing.assert_allclose([s for nb in ours for _, s in nb], [s for nb in eager for _, s in nb], atol=1e-4)
        if beam == 4:  # beta changes what the search returns here, or the comparison would show nothing
            assert sum(a != b for a, b in zip(plain, eager)) >= 3


@pytest.fixture(scope="module")
def exported(trained_run, run_cli, explain, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx")
    proc = run_cli("nmt.export", trained_run, out, "--format", "onnx")
    assert proc.returncode == 0, explain(proc)
    return out


def test_export_cli_writes_a_complete_folder(exported, run_cli, tmp_path):
    for name in ("encoder.onnx", "decoder_step.onnx", "spm.src.model", "spm.tgt.model", "meta.json"):
        assert (exported / name).is_file(), name
    meta = json.loads((exported / "meta.json").read_text())
    assert meta["mode"] == "local_p" and meta["normalization"]["unicode"] == "NFKC" and meta["max_src_pieces"] == 250
    bad = run_cli("nmt.export", tmp_path / "missing.pt", tmp_path / "out2")
    assert bad.returncode == 1 and "nmt.export: error:" in bad.stderr and "Traceback" not in bad.stderr


def test_runtime_without_torch_matches_eager(exported, trained_run, hsk_corpus, cli_env, torch_tanh):
    """Greedy and beam 5 on the dev split, decoded in a process that cannot import torch, as the eager model decodes
    it with torch's tanh: the graph computes torch's, and the fast engine's 2σ(2x) − 1 (within 2.4e-7) flips near-ties
    of this 30-step model on some CPUs (1 of 100 at beam 5 on an AVX2 EPYC)."""
    from nmt.data.normalize import src_normalizer
    from nmt.decode import load_models, translate_nbest

    texts = list(hsk_corpus["dev"]["src"])
    models, tok, cfg = load_models([str(trained_run)], torch.device("cpu"))
    script = NO_TORCH + (
        "import json; from nmt.onnx_runtime import OnnxTranslator\n"
        f"t = OnnxTranslator({str(exported)!r}); texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps([[h[0][0] for h in t.translate_nbest(texts, beam=b)] for b in (1, 5)]))\n"
        "assert 'torch' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n")
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(texts), capture_output=True, text=True,
                          env=cli_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    onnx_greedy, onnx_beam = json.loads(proc.stdout)
    norm = src_normalizer(cfg.data)
    for beam, ours in ((1, onnx_greedy), (5, onnx_beam)):
        eager = [h[0][0] for h in translate_nbest(models, tok, norm, texts, beam=beam)]
        assert ours == eager, f"beam {beam}: {sum(a != b for a, b in zip(ours, eager))} of {len(texts)} differ"


def test_serve_onnx_without_torch(exported, cli_env, free_port, http, start_server):
    """``nmt.serve --onnx`` answers with attention in a process that cannot import torch."""
    proc = start_server(["--onnx", exported], cli_env, free_port, prelude=NO_TORCH)
    url = f"http://127.0.0.1:{free_port}"
    try:
        http.wait_until_up(url, proc)
        assert http.get(url + "/models")[1][0]["backend"] == "onnx"
        status, body = http.post(url + "/translate", {"text": ["老师，您好！"], "beam": 3, "attention": True})
        assert status == 200, body
        att = body["translations"][0]["attention"]
        assert len(att["weights"]) == len(att["tgt_pieces"]) and att["p_t"] is not None
        status, body = http.post(url + "/translate", [{"src": "谢谢你！", "id": 1}])
        assert status == 404 and "id" in body["error"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_compare_script(exported, trained_run, hsk_corpus, tmp_path, cli_env, explain):
    """scripts/checks/compare_onnx.py on 20 dev sentences: all identical at beam 1 and 3 but ties (the eager side runs
    the fast engine, whose tanh may flip a near-tie), speeds reported."""
    src = tmp_path / "dev.zh"
    src.write_text("\n".join(list(hsk_corpus["dev"]["src"])[:20]) + "\n", encoding="utf-8")
    script = Path(__file__).resolve().parents[1] / "scripts" / "checks" / "compare_onnx.py"
    proc = subprocess.run([sys.executable, str(script), str(trained_run), str(exported), "--input", str(src),
                           "--beams", "1", "3", "--json"], capture_output=True, text=True, env=cli_env, timeout=300)
    assert proc.returncode == 0, explain(proc)
    rows = json.loads(proc.stdout)
    assert [(r["beam"], r["identical"] + r["differ_by_ties"]) for r in rows] == [(1, 20), (3, 20)]
    assert all(r["identical"] >= 18 for r in rows), rows
    assert all(r["eager_sent_per_s"] > 0 and r["onnx_sent_per_s"] > 0 for r in rows)


def test_int8_export_translates_close_to_the_fp32_export(make_model, random_sources, hsk_tokenizer, tmp_path):
    """``export_onnx(int8=True)`` / ``nmt.export --int8``: onnxruntime's int8 graphs, smaller, scores near fp32's."""
    model = make_model(40, 30, mode="local_p", window=3, encoder_layers=2, decoder_layers=2, bidirectional=True,
                       hidden_size=64, emb_size=64)
    with torch.no_grad():
        model.decoder.out.weight.mul_(30)
        model.decoder.out.bias.mul_(30)
    export_onnx(model, hsk_tokenizer, export_cfg("local_p", 3), tmp_path / "fp32")
    export_onnx(model, hsk_tokenizer, export_cfg("local_p", 3), tmp_path / "int8", int8=True)
    assert json.loads((tmp_path / "int8" / "meta.json").read_text())["int8"] is True
    size = {k: (tmp_path / k / "decoder_step.onnx").stat().st_size for k in ("fp32", "int8")}
    assert size["int8"] < 0.6 * size["fp32"]  # the encoder stays fp32, as in nmt/int8.py
    assert (tmp_path / "int8" / "encoder.onnx").read_bytes() == (tmp_path / "fp32" / "encoder.onnx").read_bytes()
    sources = random_sources(9, 1, 15, 40, seed=3)
    fp32, int8 = OnnxTranslator(tmp_path / "fp32").beam(sources, 4), OnnxTranslator(tmp_path / "int8").beam(sources, 4)
    same = sum(a[0][0] == b[0][0] for a, b in zip(fp32, int8))
    assert same >= 7, f"{same} of 9 best hypotheses as fp32's"
    np.testing.assert_allclose([nb[0][1] for nb in int8], [nb[0][1] for nb in fp32], atol=0.15)


def test_export_cli_int8(trained_run, run_cli, explain, tmp_path):
    proc = run_cli("nmt.export", trained_run, tmp_path / "out", "--int8")
    assert proc.returncode == 0, explain(proc)
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["int8"] is True
    assert OnnxTranslator(tmp_path / "out").translate_nbest(["我爱你。"], beam=2, n_best=1)[0][0][0]


SCORE_MODES = [(s, m, 1) for s in ("dot", "general", "concat", "location", "scaled_dot")
               for m in ("global", "local_m", "local_p")] + [("scaled_dot", "global", 2), ("scaled_dot", "local_p", 2)]


@pytest.mark.parametrize("score,mode,heads", SCORE_MODES)
def test_onnx_matches_eager_for_every_score_and_mode(make_model, random_sources, hsk_tokenizer, tmp_path, score, mode,
                                                      heads):
    """Greedy and beam 3 (n-best 2) of the runtime against the eager search, token for token, every score × mode and
    multi-head attention."""
    model = make_model(40, 30, score=score, mode=mode, window=3, heads=heads, hidden_size=16 * heads)
    with torch.no_grad():
        model.decoder.out.weight.mul_(30)
        model.decoder.out.bias.mul_(30)
    cfg = export_cfg(mode, 3)
    cfg.model.attention.score = score
    export_onnx(model, hsk_tokenizer, cfg, tmp_path)
    onnx = OnnxTranslator(tmp_path)
    sources = random_sources(9, 1, 15, 40, seed=3)
    batch = make_batch(sources, None, range(len(sources)))
    assert [toks for toks, _ in onnx.greedy(sources)] == greedy(model, batch).tokens
    eager, ours = beam_search(model, batch, beam=3, n_best=2), onnx.beam(sources, 3, n_best=2)
    np.testing.assert_allclose([s for nb in ours for _, s in nb], [s for nb in eager.nbest for _, s in nb], atol=1e-4)
    for mine, theirs in zip(ours, eager.nbest):  # the same best hypothesis unless it ties with the next; the
        tied = abs(theirs[0][1] - theirs[1][1]) < 1e-4  # second may tie with one outside the n-best (either order)
        assert tied or mine[0][0] == theirs[0][0], (mine, theirs)
