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


def _j(obj: object) -> bytes:
    return json.dumps(obj).encode()


MALFORMED = [  # (body, status, the field the error names first)
    (b"{not json", 400, "body"), (b"\xff\xfe", 400, "body"), (b"42", 400, "body"), (b"[]", 400, "body"),
    (_j({"text": []}), 400, "text"), (_j({"text": [1]}), 400, "text[0]"),
    (_j({"text": "a" * 100_000}), 413, "text[0]"), (_j({"text": ["a"] * 9}), 413, "text"),
    (_j({"text": ["a"], "beam": 0}), 400, "beam"), (_j({"text": ["a"], "beam": "5"}), 400, "beam"),
    (_j({"text": ["a"], "n_best": 3, "beam": 2}), 400, "n_best"),
    (_j({"text": ["a"], "model": 2}), 404, "model"), (_j([{"src": "a", "id": 7}]), 404, "[0].id"),
    (_j([{"id": 0}]), 400, "[0].src"), (_j({"text": ["a"], "beem": 5}), 400, "beem"),
    (_j({"text": ["a"], "attention": "yes"}), 400, "attention"), (b"x" * 400_000, 413, "body"),
]


@pytest.mark.parametrize("body,status,field", MALFORMED)
def test_malformed_requests_get_a_4xx_json_error(server, http, body, status, field):
    got, answer = http.request(server + "/translate", body)
    assert got == status and answer["error"].startswith(field), answer


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


def test_bf16_engine_answers_like_fp32(trained_run, reference):
    """``--precision bf16``: the same search under bf16 autocast; scores stay close, /models says so."""
    from nmt.serve.engines import TorchEngine

    engine = TorchEngine(str(trained_run), "cpu", "bf16")
    assert engine.info["precision"] == "bf16"
    rows = engine.translate(SENTENCES, beam=2, n_best=1, attention=True)
    assert [r["src"] for r in rows] == SENTENCES and rows[3]["tgt"] == ""
    assert [r["score"] for r in rows] == pytest.approx([s for _, s in reference[0]], abs=0.5)  # bf16 rounding
    assert all(len(r["attention"]["weights"]) == len(r["attention"]["tgt_pieces"]) for r in rows)


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
    engine.translate = lambda *a: seen.append((threading.current_thread().name, torch.get_num_threads())) or translate(*a)
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
