"""Load check of a running ``nmt.serve``: N concurrent clients, one sentence per request, on 127.0.0.1 only.

    python scripts/bench/load_serve.py --url http://127.0.0.1:5000 --input dev.zh --clients 32 --beam 5 \\
        --requests 1000 --seconds 120 --malformed 20 [--compare RUN]

Each client sends the next sentence as soon as its previous answer came; the run stops after
``--requests`` sentences or ``--seconds``, whichever comes first. The server's ``/health``
counters give the decode calls made and the share of the run spent decoding
(``server_decoding``). ``--malformed K`` mixes K bad requests (bad JSON, wrong types, 100 kB
lines, empty lists, unknown model id) in; each must get a 4xx JSON error. ``--compare RUN`` then
translates the same sentences with ``nmt.translate``'s batched search in this process, for the
throughput ratio. Prints a table, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
BAD = [b"{not json", json.dumps({"text": [1]}).encode(), json.dumps({"text": ["\u4e00" * 100_000]}).encode(),
       json.dumps({"text": []}).encode(), json.dumps([{"src": "\u4f60\u597d", "id": 99}]).encode()]


class Client:
    """One client's keep-alive HTTP/1.1 connection, as an HTTP library holds it; reconnects once when the
    server has closed it (after a 4xx answer, or idle)."""

    def __init__(self, url: str, timeout: float, keep_alive: bool = True):
        parts = urlsplit(url)
        self.host, self.port, self.timeout, self.keep_alive = parts.hostname, parts.port or 80, timeout, keep_alive
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes) -> tuple[int, object]:
        """Status and JSON answer of one POST (None where the answer is not JSON)."""
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request("POST", path, body, {"Content-Type": "application/json",
                                                       "Connection": "keep-alive" if self.keep_alive else "close"})
                answer = self.conn.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if not self.keep_alive or answer.will_close:
                self.close()
            try:
                return answer.status, json.loads(data)
            except ValueError:
                return answer.status, None
        raise AssertionError("unreachable")

    def get(self, path: str) -> tuple[int, object]:
        """Status and JSON answer of one GET on a connection of its own."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            data = answer.read()
        finally:
            conn.close()
        try:
            return answer.status, json.loads(data)
        except ValueError:
            return answer.status, None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def run_load(url: str, sentences: list[str], clients: int, beam: int, requests: int, seconds: float,
             malformed: int, keep_alive: bool = True) -> dict:
    """Drive the server; latencies of good requests, error counts, and the bad requests' statuses."""
    total = min(requests, len(sentences)) if requests else len(sentences)
    bad_at = set(np.linspace(0, total - 1, malformed).astype(int).tolist()) if malformed else set()
    counter, lock = itertools.count(), threading.Lock()
    lat, errors, bad_status, deadline = [], [], [], time.monotonic() + seconds

    def client() -> None:
        http_client = Client(url, seconds, keep_alive)
        while time.monotonic() < deadline:
            with lock:
                i = next(counter)
            if i >= total:
                return
            if i in bad_at:
                try:
                    status, _ = http_client.post("/translate", BAD[len(bad_status) % len(BAD)])
                except (OSError, ValueError):  # a reset connection is not the 4xx answer asked for
                    status = 0
                with lock:
                    bad_status.append(status)
            t0 = time.monotonic()
            try:
                status, answer = http_client.post("/translate", json.dumps({"text": [sentences[i]], "beam": beam}).encode())
            except (OSError, ValueError) as e:  # no answer, or not JSON: an error, never a lost sentence
                status, answer = 0, {"error": str(e)}
            with lock:
                (lat if status == 200 else errors).append(time.monotonic() - t0 if status == 200 else (status, answer))
        http_client.close()

    before = _health(url)
    start = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 30)
    wall = time.monotonic() - start
    after = _health(url)
    ms = np.array(lat) * 1000 if lat else np.zeros(1)
    return {"clients": clients, "beam": beam, "keep_alive": keep_alive, "sentences": len(lat), "seconds": round(wall, 2),
            "sentences_per_s": round(len(lat) / wall, 2), "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1), "p99_ms": round(float(np.percentile(ms, 99)), 1),
            "errors": len(errors), "first_error": errors[0] if errors else None, "malformed_sent": len(bad_status),
            "malformed_4xx": sum(400 <= s < 500 for s in bad_status),
            "server_batches": after.get("batches", 0) - before.get("batches", 0),
            "server_decoding": round((after.get("decode_s", 0.0) - before.get("decode_s", 0.0)) / wall, 3)}


def _health(url: str) -> dict:
    """The server's ``/health`` counters ({} where it has none)."""
    try:
        status, body = Client(url, 10.0, keep_alive=False).get("/health")
    except OSError:
        return {}
    return body if status == 200 and isinstance(body, dict) else {}


def compare(run: str, sentences: list[str], beam: int, precision: str = "fp32") -> float:
    """Sentences/s of ``nmt.translate``'s batched search on the same sentences, in this process."""
    import torch

    from nmt.data.normalize import src_normalizer
    from nmt.decode import load_models, translate_nbest
    from nmt.device import set_threads

    set_threads(0)
    models, tok, cfg = load_models([run], torch.device("cpu"), precision)
    start = time.monotonic()
    translate_nbest(models, tok, src_normalizer(cfg.data), sentences, beam=beam, precision=precision)
    return len(sentences) / (time.monotonic() - start)


def append_record(path: Path, url: str, report: dict) -> None:
    """Append this run to the record at ``path`` (a JSON list): date, commit, command, CPU, the server's models."""
    try:
        status, models = Client(url, 10.0, keep_alive=False).get("/models")
    except OSError:
        status, models = 0, None
    runs = json.loads(path.read_text()) if path.exists() else []
    save(path, [*runs, record({"models": models if status == 200 else None, "report": report})])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:5000", help="the server (loopback addresses only)")
    p.add_argument("--input", required=True, help="sentences, one per line")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--requests", type=int, default=0, help="at most this many sentences (0: the whole file)")
    p.add_argument("--seconds", type=float, default=120.0, help="stop after this long")
    p.add_argument("--malformed", type=int, default=0, help="bad requests mixed in")
    p.add_argument("--no-keep-alive", action="store_true", help="a new connection per request (default: one per client)")
    p.add_argument("--compare", metavar="RUN", help="also time nmt.translate on the sentences sent")
    p.add_argument("--compare-precision", choices=("fp32", "bf16", "bf16_output", "int8"), default="fp32",
                   help="the precision of that nmt.translate run (match the server's --precision)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--record", type=Path, help="append the run to this JSON record (a list; date, commit, command, CPU, "
                                               "the server's /models), e.g. docs/results/serve_load_int8.json")
    args = p.parse_args(argv)
    host = urlsplit(args.url).hostname
    if host not in LOOPBACK:
        p.error(f"--url: {host!r} is not a loopback address; this check only loads a server on this machine")
    if not 1 <= args.clients <= 256 or args.seconds <= 0:
        p.error("--clients must be 1..256 and --seconds positive")
    sentences = [s for s in Path(args.input).read_text(encoding="utf-8").splitlines() if s.strip()]
    report = run_load(args.url.rstrip("/"), sentences, args.clients, args.beam, args.requests, args.seconds,
                      args.malformed, keep_alive=not args.no_keep_alive)
    if args.compare:
        sps = compare(args.compare, sentences[: report["sentences"]], args.beam, args.compare_precision)
        report.update(translate_sentences_per_s=round(sps, 2), translate_precision=args.compare_precision,
                      ratio=round(report["sentences_per_s"] / sps, 3))
    if args.record:
        append_record(args.record, args.url.rstrip("/"), report)
    if args.json:
        print(json.dumps(report))
    else:
        for k, v in report.items():
            print(f"{k:>26}  {v}")
    return 0 if report["errors"] == 0 and report["malformed_4xx"] == report["malformed_sent"] else 1


if __name__ == "__main__":
    sys.exit(main())
