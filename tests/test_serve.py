"""``python -m nmt.serve``: one real server (``server`` in conftest.py: the shared tiny run twice, on
127.0.0.1) for the session; the batcher's queue, timeout and isolation rules tested directly with a fake decoder."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from nmt.serve.batcher import Batcher, QueueFull

SENTENCES = ["老师，您好！", "图书馆在学校里边。", "谢谢你！不客气。", "", "我们明天去北京。"]


@pytest.fixture(scope="module")
def reference(trained_run):
    """What ``nmt.translate`` gives for SENTENCES with beam 2: [(tgt, score)]."""
    from nmt.data.normalize import src_normalizer
    from nmt.decode import load_models, translate_nbest

    models, tok, cfg = load_models([str(trained_run)], torch.device("cpu"))
    return [h[0] for h in translate_nbest(models, tok, src_normalizer(cfg.data), SENTENCES, beam=2)], cfg


@pytest.fixture(scope="module")
def translator(trained_run):
    """The shared run through the Python API, for what a request with search settings should give."""
    from nmt.translator import Translator

    return Translator.load(str(trained_run), "cpu")


def test_plain_request_matches_translate(server, http, reference):
    status, body = http.post(server + "/translate", {"text": SENTENCES, "beam": 2, "n_best": 2})
    assert status == 200, body
    rows = body["translations"]
    assert [r["src"] for r in rows] == SENTENCES
    assert [r["tgt"] for r in rows] == [t for t, _ in reference[0]]
    assert [r["score"] for r in rows] == pytest.approx([s for _, s in reference[0]], abs=1e-3)  # other batch, other rounding
    assert all(len(r["n_best"]) <= 2 and r["n_best"][0]["tgt"] == r["tgt"] for r in rows)


def test_opennmt_request_shape(server, http, reference):
    status, body = http.post(server + "/translate", [{"src": SENTENCES[0], "id": 1}, {"src": SENTENCES[1], "id": 0}])
    assert status == 200, body
    assert [r["src"] for r in body[0]] == SENTENCES[:2] and [r["id"] for r in body[0]] == [1, 0]
    assert [r["tgt"] for r in body[0]] == [t for t, _ in reference[0][:2]]
    assert {"tgt", "pred_score", "n_best"} <= set(body[0][0])


def test_attention_and_p_t(server, http, reference):
    status, body = http.post(server + "/translate", {"text": [SENTENCES[1], ""], "attention": True})
    assert status == 200, body
    for row in body["translations"]:
        att = row["attention"]
        assert len(att["weights"]) == len(att["tgt_pieces"]) and att["tgt_pieces"][-1] == "</s>"
        # local-p weighs the softmax by a Gaussian around p_t: a row sums to at most 1
        assert all(len(w) == len(att["src_pieces"]) and 0 < sum(w) < 1.01 for w in att["weights"])
        assert len(att["p_t"]) == len(att["tgt_pieces"]) and att["window"] == reference[1].model.attention.window


def test_concurrent_requests_are_batched(server, http, reference):
    """16 clients at once: every answer is its own line's, and fewer decode calls than requests ran."""
    before = http.get(server + "/health")[1]
    jobs = [SENTENCES[i % 3] for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda t: http.post(server + "/translate", {"text": [t], "beam": 2}), jobs))
    assert all(status == 200 for status, _ in answers), answers
    assert [b["translations"][0]["tgt"] for _, b in answers] == [reference[0][i % 3][0] for i in range(16)]
    after = http.get(server + "/health")[1]
    assert after["requests"] - before["requests"] == 16
    assert after["batches"] - before["batches"] < 16
    assert 0 < after["decode_s"] - before["decode_s"] <= after["uptime_s"] - before["uptime_s"] + 0.2


SETTINGS = {"beam": 3, "n_best": 3, "alpha": 0.6, "beta": 0.2, "stop": "first"}  # none of them the server's default


def test_plain_request_search_settings_match_the_api(server, http, translator):
    """alpha, beta, stop and n_best of a plain request reach the search: the n-best texts and scores of
    ``Translator.translate`` with those settings, which part ways with the server's defaults'."""
    status, body = http.post(server + "/translate", {"text": SENTENCES, **SETTINGS})
    assert status == 200, body
    want = translator.translate(SENTENCES, **SETTINGS)
    rows = body["translations"]
    assert [[h["tgt"] for h in r["n_best"]] for r in rows] == [[h.text for h in t.nbest] for t in want]
    scores = [h["score"] for r in rows for h in r["n_best"]]
    assert scores == pytest.approx([h.score for t in want for h in t.nbest], abs=1e-3)
    default = translator.translate(SENTENCES, beam=3, n_best=3)  # the server's alpha, beta and stop
    assert [h.score for t in default for h in t.nbest] != pytest.approx(scores, abs=1e-3)


def test_concurrent_requests_with_other_settings_get_their_own(server, http, translator):
    """One-line requests alternating two search settings at once: each answer is its own setting's (lines of
    different settings never share a beam search)."""
    settings = [{"alpha": 0.6, "stop": "first"}, {"alpha": 1.0, "beta": 0.2, "stop": "exact"}]
    want = [[t.score for t in translator.translate(SENTENCES[:3], beam=2, **s)] for s in settings]
    assert want[0] != pytest.approx(want[1], abs=1e-3)  # the settings part ways on these lines
    jobs = [(SENTENCES[i % 3], settings[i % 2]) for i in range(12)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda j: http.post(server + "/translate", {"text": [j[0]], "beam": 2, **j[1]}), jobs))
    assert all(status == 200 for status, _ in answers), answers
    got = [b["translations"][0]["score"] for _, b in answers]
    assert got == pytest.approx([want[i % 2][i % 3] for i in range(12)], abs=1e-3)


def _j(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_search_settings_are_part_of_the_batch_key():
    """Requests differing in any search setting get different batcher keys; fields left out take the server's
    ``Defaults``, in both request shapes."""
    from nmt.serve.requests import Defaults, Limits, parse

    def key(body: object, defaults: Defaults = Defaults(beam=2)):
        return parse(_j(body), Limits(), 1, defaults)[1][0].key

    base = key({"text": ["a"]})
    assert base == key({"text": ["a"], "beam": 2, "n_best": 1, "alpha": 1.0, "beta": 0.0, "stop": "full"})
    others = [{"alpha": 0.6}, {"beta": 0.2}, {"stop": "first"}, {"n_best": 2}, {"beam": 3}, {"attention": True}]
    assert len({base, *(key({"text": ["a"], **o}) for o in others)}) == 1 + len(others)
    d = Defaults(beam=3, alpha=0.5, beta=0.1, stop="exact")
    for body in ({"text": ["a"]}, [{"src": "a", "id": 0}]):
        k = key(body, d)
        assert (k.beam, k.n_best, k.alpha, k.beta, k.stop) == (3, 1, 0.5, 0.1, "exact")


def test_the_servers_bounds_are_the_commands():
    """The server's stop rules and beta bound, written out so that it imports no torch, are the search's and the
    commands'."""
    from nmt.cli import BETA_MAX
    from nmt.search import STOPS
    from nmt.serve import requests

    assert requests.STOPS == STOPS and requests.BETA_MAX == BETA_MAX


MALFORMED = [  # (body, status, the field the error names first)
    (b"{not json", 400, "body"), (b"\xff\xfe", 400, "body"), (b"42", 400, "body"), (b"[]", 400, "body"),
    (_j({"text": []}), 400, "text"), (_j({"text": [1]}), 400, "text[0]"),
    (_j({"text": "a" * 100_000}), 413, "text[0]"), (_j({"text": ["a"] * 9}), 413, "text"),
    (_j({"text": ["a"], "beam": 0}), 400, "beam"), (_j({"text": ["a"], "beam": "5"}), 400, "beam"),
    (_j({"text": ["a"], "n_best": 3, "beam": 2}), 400, "n_best"),
    (_j({"text": ["a"], "model": 2}), 404, "model"), (_j([{"src": "a", "id": 7}]), 404, "[0].id"),
    (_j([{"id": 0}]), 400, "[0].src"), (_j({"text": ["a"], "beem": 5}), 400, "beem"),
    (_j({"text": ["a"], "attention": "yes"}), 400, "attention"), (b"x" * 400_000, 413, "body"),
    (_j({"text": ["a"], "alpha": "x"}), 400, "alpha"), (_j({"text": ["a"], "alpha": 2.5}), 400, "alpha"),
    (_j({"text": ["a"], "alpha": -0.1}), 400, "alpha"), (_j({"text": ["a"], "beta": 1.5}), 400, "beta"),
    (_j({"text": ["a"], "beta": [0.2]}), 400, "beta"), (_j({"text": ["a"], "beta": True}), 400, "beta"),
    (b'{"text": ["a"], "beta": NaN}', 400, "beta"), (_j({"text": ["a"], "stop": "fast"}), 400, "stop"),
    (_j({"text": ["a"], "stop": 1}), 400, "stop"), (_j({"text": ["a"], "n_best": 0}), 400, "n_best"),
    (_j({"text": ["a"], "n_best": "2"}), 400, "n_best"),
]


@pytest.mark.parametrize("body,status,field", MALFORMED)
def test_malformed_requests_get_a_4xx_json_error(server, http, body, status, field):
    got, answer = http.request(server + "/translate", body)
    assert got == status and answer["error"].startswith(field), answer


@pytest.mark.parametrize("fields,message", [
    ({"beta": "x"}, 'beta: must be a number between 0 and 1, got "x"'),
    ({"beta": -1}, "beta: must be a number between 0 and 1, got -1"),
    ({"alpha": 3.5}, "alpha: must be a number between 0 and 2, got 3.5"),
    ({"alpha": None}, "alpha: must be a number between 0 and 2, got null"),
    ({"stop": "fast"}, 'stop: must be one of exact, full, first, got "fast"'),
    ({"stop": "x" * 100}, 'stop: must be one of exact, full, first, got "' + "x" * 36 + "..."),
    ({"n_best": 3}, "n_best: 3 is outside 1..2"),  # the server's --beam 2
])
def test_a_bad_search_setting_is_a_400_naming_the_field_and_value(server, http, fields, message):
    got, answer = http.post(server + "/translate", {"text": ["a"], **fields})
    assert got == 400 and answer == {"error": message}, answer


def test_bad_requests_do_not_harm_good_ones(server, http, reference):
    bodies = [json.dumps({"text": [SENTENCES[0]], "beam": 2}).encode(), *[b for b, _, _ in MALFORMED]] * 2
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda b: http.request(server + "/translate", b), bodies))
    good = [a for a, b in zip(answers, bodies) if b == bodies[0]]
    assert all(s == 200 and a["translations"][0]["tgt"] == reference[0][0][0] for s, a in good)
    assert all(400 <= s < 500 for (s, _), b in zip(answers, bodies) if b != bodies[0])


@pytest.mark.parametrize("body,message", [
    (b"[" * 10_000 + b"]" * 10_000, "body: JSON nested too deeply"),
    (b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "body: JSON nested too deeply"),
    (b"1" * 5000, "body: JSON that cannot be read (Exceeds the limit"),  # json's int digits limit: a ValueError
], ids=["nested", "nested-text", "long-int"])
def test_json_that_python_cannot_parse_gets_a_400(server, http, reference, body, message):
    """Bodies that make json.loads raise RecursionError or a plain ValueError (not JSONDecodeError)
    are a 400 with one line, not a 500 with a traceback; the server answers the next request."""
    got, answer = http.request(server + "/translate", body)
    assert got == 400 and answer["error"].startswith(message) and "\n" not in answer["error"], answer
    status, ok = http.post(server + "/translate", {"text": [SENTENCES[0]], "beam": 2})
    assert status == 200 and ok["translations"][0]["tgt"] == reference[0][0][0], ok


def test_models_health_page_and_unknown_routes(server, http, trained_run):
    status, models = http.get(server + "/models")
    assert status == 200 and [m["id"] for m in models] == [0, 1] and models[0]["attention"]["mode"] == "local_p"
    assert http.get(server + "/health")[1]["status"] == "ok"
    status, page = http.get(server + "/")
    assert status == 200 and 'id="src"' in page and "/static/app.js" in page and "http" not in page.split("<body>")[1]
    assert http.get(server + "/static/app.js")[0] == 200
    status, err = http.get(server + "/nowhere")
    assert status == 404 and "/nowhere" in err["error"]
    assert http.get(server + "/translate")[0] == 405


def test_bf16_engine_answers_as_the_api_in_bf16(trained_run, reference):
    """``--precision bf16``: the engine's search runs its matmuls in bf16 (the output layer's results, seen by a hook)
    and answers with the texts and scores of ``Translator`` in bf16, attention included; /models says so. Against
    fp32 only the scores are compared: each line's two best hypotheses of this 30-step model lie within 2e-4 of each
    other, so bf16's rounding (about 1e-2) picks among near-ties and which text wins depends on the CPU's kernels."""
    from nmt.serve.engines import TorchEngine
    from nmt.translator import Translator

    engine = TorchEngine(str(trained_run), "cpu", "bf16")
    assert engine.info["precision"] == "bf16"
    seen = []
    engine.translator.models[0].decoder.out.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
    rows = engine.translate(SENTENCES, beam=2, n_best=2, attention=True)
    assert set(seen) == {torch.bfloat16}
    want = Translator.load(str(trained_run), "cpu", "bf16").translate(SENTENCES, beam=2, n_best=2)
    assert [[h["tgt"] for h in r["n_best"]] for r in rows] == [[h.text for h in t.nbest] for t in want]
    assert [r["score"] for r in rows] == pytest.approx([t.score for t in want], abs=1e-4)
    assert [r["src"] for r in rows] == SENTENCES and rows[3]["tgt"] == ""
    assert [r["score"] for r in rows] == pytest.approx([s for _, s in reference[0]], abs=0.5)  # bf16 rounding
    assert all(len(r["attention"]["weights"]) == len(r["attention"]["tgt_pieces"]) for r in rows)


def test_each_engine_decodes_with_the_requests_settings(trained_run, run_cli, explain, tmp_path):
    """Through ``create_app``, a plain request's beam, n_best, alpha, beta and stop reach each engine's search (the
    TorchEngine's ``Translator.translate``, the OnnxEngine's ``translate_nbest``: their calls recorded) and the answer
    is that search's; a request that gives none gets the server's ``Defaults``."""
    from starlette.testclient import TestClient

    from nmt.serve.app import create_app
    from nmt.serve.engines import OnnxEngine, TorchEngine
    from nmt.serve.requests import Defaults

    export = run_cli("nmt.export", trained_run, tmp_path / "onnx", "--format", "onnx")
    assert export.returncode == 0, explain(export)
    engines = [TorchEngine(str(trained_run), "cpu", threads=1), OnnxEngine(str(tmp_path / "onnx"), threads=1)]
    calls = []
    for obj, name in ((engines[0].translator, "translate"), (engines[1].translator, "translate_nbest")):
        real = getattr(obj, name)
        setattr(obj, name, lambda *a, real=real, **kw: calls.append(kw) or real(*a, **kw))
    defaults = Defaults(beam=2, alpha=0.8, beta=0.1, stop="exact")
    with TestClient(create_app(engines, defaults=defaults)) as client:
        answers = [client.post("/translate", json={"text": SENTENCES, "model": m, **SETTINGS}).json() for m in (0, 1)]
        plain = [client.post("/translate", json={"text": SENTENCES[:1], "model": m}).json() for m in (0, 1)]
    from_defaults = {"beam": 2, "n_best": 1, "alpha": 0.8, "beta": 0.1, "stop": "exact"}
    assert [{k: c[k] for k in SETTINGS} for c in calls] == [SETTINGS, SETTINGS, from_defaults, from_defaults]
    torch_want = engines[0].translator.translate(SENTENCES, **SETTINGS)
    onnx_want = engines[1].translator.translate_nbest(SENTENCES, **SETTINGS)
    for rows, want in ((answers[0]["translations"], [[(h.text, h.score) for h in t.nbest] for t in torch_want]),
                       (answers[1]["translations"], onnx_want)):
        assert [[h["tgt"] for h in r["n_best"]] for r in rows] == [[t for t, _ in nb] for nb in want]
        assert [h["score"] for r in rows for h in r["n_best"]] == pytest.approx([s for nb in want for _, s in nb], abs=1e-3)
    assert all(p["translations"][0]["src"] == SENTENCES[0] for p in plain)


def test_decoding_threads_get_the_engines_intra_op_threads(trained_run):
    """``create_app`` runs each engine's ``use_threads`` first in every decoding thread: there the
    engine's intra-op threads, while the thread that loaded it keeps its own count (``nmt.serve`` sets 1)."""
    from starlette.testclient import TestClient

    from nmt.serve.app import create_app
    from nmt.serve.engines import TorchEngine

    before = torch.get_num_threads()
    engine = TorchEngine(str(trained_run), "cpu", threads=3)
    seen = []
    translate = engine.translate
    engine.translate = lambda *a, **kw: seen.append((threading.current_thread().name, torch.get_num_threads())) or \
        translate(*a, **kw)
    try:
        with TestClient(create_app([engine], workers=1)) as client:
            answer = client.post("/translate", json={"text": [SENTENCES[0]], "beam": 2})
        assert answer.status_code == 200 and answer.json()["translations"][0]["src"] == SENTENCES[0]
        assert len(seen) == 1 and seen[0][0].startswith("nmt-decode") and seen[0][1] == 3
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- the batcher alone
def _run(coro):
    return asyncio.run(coro)


def test_batcher_groups_by_key_and_isolates_failures():
    calls = []

    def decode(key, lines):
        calls.append((key, list(lines)))
        if "bad" in lines:
            raise ValueError("cannot decode 'bad'")
        return [f"{key}:{t}" for t in lines]

    async def main():
        b = Batcher(decode, wait_ms=20)
        b.start()
        results = await asyncio.gather(b.submit(1, ["a", "b"], 5), b.submit(1, ["bad"], 5), b.submit(2, ["c"], 5),
                                        return_exceptions=True)
        await b.stop()
        return results

    a, bad, c = _run(main())
    assert a == ["1:a", "1:b"] and c == ["2:c"] and isinstance(bad, ValueError)
    assert calls[0] == (1, ["a", "b", "bad"])  # one call for key 1, then one by one after it failed


def test_batcher_queue_limit_and_timeout():
    def slow(key, lines):
        time.sleep(0.3)
        return list(lines)

    async def main():
        b = Batcher(slow, wait_ms=50, max_queue=3)
        b.start()
        first = asyncio.ensure_future(b.submit(0, ["a", "b"], 5))
        await asyncio.sleep(0)  # "a", "b" are waiting
        with pytest.raises(QueueFull):
            await b.submit(0, ["c", "d"], 5)
        with pytest.raises(asyncio.TimeoutError):
            await b.submit(0, ["e"], 0.05)
        later = await b.submit(0, ["f"], 5)  # the timed-out job left the queue; the worker goes on
        result = await first
        await b.stop()
        return result, later

    assert _run(main()) == (["a", "b"], ["f"])


def test_batcher_waits_for_the_callers_just_answered():
    """A batch starts ``wait_ms`` after its thread is free, not at once: the caller answered by the batch
    that just ended sends its next line in time to join the line that waited meanwhile."""
    calls = []

    def decode(key, lines):
        calls.append(list(lines))
        time.sleep(0.2)
        return list(lines)

    async def main():
        b = Batcher(decode, wait_ms=100)
        b.start()

        async def caller():
            assert await b.submit(0, ["a"], 30) == ["a"]
            return await b.submit(0, ["c"], 30)

        first = asyncio.ensure_future(caller())
        while not calls:  # "a" is being decoded
            await asyncio.sleep(0.01)
        second = await b.submit(0, ["b"], 30)  # waits while "a" decodes
        result = await first, second
        await b.stop()
        return result

    assert _run(main()) == (["c"], ["b"])
    assert calls == [["a"], ["b", "c"]]


def test_batcher_workers_decode_batches_side_by_side():
    """With two workers a batch that arrives while another decodes starts at once (each call waits at a
    barrier for the other: with one worker it would time out)."""
    barrier, calls = threading.Barrier(2, timeout=10), []

    def decode(key, lines):
        calls.append(list(lines))
        barrier.wait()
        return [t.upper() for t in lines]

    async def main():
        b = Batcher(decode, wait_ms=1, workers=2)
        b.start()
        first = asyncio.ensure_future(b.submit(0, ["a"], 30))
        while not calls:  # "a" is being decoded
            await asyncio.sleep(0.01)
        second = await b.submit(0, ["b", "c"], 30)
        result = await first, second
        await b.stop()
        return result

    assert _run(main()) == (["A"], ["B", "C"])
    assert calls == [["a"], ["b", "c"]]
    with pytest.raises(ValueError, match="workers must be at least 1"):
        Batcher(decode, workers=0)


def test_load_script_bounded(server, tmp_path, cli_env, explain):
    """scripts/bench/load_serve.py in a tiny form: 4 clients, 12 sentences, 4 malformed requests, 60 s at most."""
    import subprocess
    import sys

    src = tmp_path / "dev.zh"
    src.write_text("\n".join(SENTENCES * 3) + "\n", encoding="utf-8")
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "load_serve.py"
    cmd = [sys.executable, str(script), "--url", server, "--input", str(src), "--clients", "4",
           "--beam", "2", "--requests", "12", "--seconds", "60", "--malformed", "4", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env, timeout=120)
    assert proc.returncode == 0, explain(proc)
    report = json.loads(proc.stdout)
    assert report["sentences"] == 12 and report["errors"] == 0
    assert report["malformed_sent"] == report["malformed_4xx"] == 4
    assert 0 < report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"]
    assert 1 <= report["server_batches"] <= 12 + 4 and 0 < report["server_decoding"] <= 1
    far = subprocess.run([*cmd[:3], "http://192.0.2.1:5000", *cmd[4:]], capture_output=True, text=True, timeout=60)
    assert far.returncode == 2 and "not a loopback address" in far.stderr


def test_cli_errors_are_one_line(run_cli, tmp_path):
    proc = run_cli("nmt.serve", tmp_path / "missing.pt", "--port", "1")
    assert proc.returncode == 1 and "nmt.serve: error:" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("nmt.serve")
    assert proc.returncode == 2 and "give at least one model" in proc.stderr
    proc = run_cli("nmt.serve", tmp_path / "missing.pt", "--workers", "-1")
    assert proc.returncode == 2 and "--workers must be 1 or more" in proc.stderr
    proc = run_cli("nmt.serve", tmp_path / "missing.pt", "--precision", "fp16")
    assert proc.returncode == 2 and "invalid choice: 'fp16'" in proc.stderr
    proc = run_cli("nmt.serve", tmp_path / "missing.pt", "--beta", "2")  # refused before any model is read
    assert proc.returncode == 2 and "error: --beta: must be a number between 0 and 1, got 2.0" in proc.stderr
    proc = run_cli("nmt.serve", tmp_path / "missing.pt", "--beam", "12")
    assert proc.returncode == 2 and "error: --beam: 12 is outside 1..10 (--max-beam 10)" in proc.stderr
