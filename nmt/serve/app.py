"""Translation over HTTP: ``python -m nmt.serve RUN [RUN ...] [--onnx DIR ...] --host 127.0.0.1 --port 5000``.

Routes: ``POST /translate`` (OpenNMT-py's request shape or a plain one, see
``nmt/serve/requests.py``), ``GET /models``, ``GET /health`` and ``GET /``, a page that
translates and shows the attention of each target word. Concurrent requests are batched
(``nmt/serve/batcher.py``). Models are numbered from 0: the checkpoints, then the ONNX folders.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nmt.serve.batcher import Batcher, QueueFull
from nmt.serve.engines import Engine
from nmt.serve.requests import ALPHA_MAX, BETA_MAX, STOPS, Defaults, Limits, Query, RequestError, Search, check_defaults, parse

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"


DRAIN = 16  # an oversized body up to this many times the limit is read (and dropped) before the 413


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 once it passes ``limit`` bytes.

    A body somewhat over the limit is still read to its end (and dropped) so that the client,
    still sending, gets the 413 instead of a reset connection; far larger ones are cut off.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > DRAIN * limit:
        raise RequestError(413, f"body: {declared} bytes, the limit is {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > DRAIN * limit:
            break
        if size <= limit:
            chunks.append(chunk)
    if size > limit:
        raise RequestError(413, f"body: {declared or f'more than {limit}'} bytes, the limit is {limit}")
    return b"".join(chunks)


def answer(shape: str, queries: list[Query], results: list[list[dict]]) -> object:
    """OpenNMT-py's ``[[{src, tgt, n_best, pred_score}, …]]`` in request order, or the plain shape."""
    if shape == "plain":
        return {"model": queries[0].model, "translations": results[0]}
    rows: dict[int, dict] = {}
    for q, res in zip(queries, results):
        for pos, r in zip(q.positions, res):
            rows[pos] = {"src": r["src"], "tgt": r["tgt"], "n_best": 1, "pred_score": r["score"], "id": q.model}
    return [[rows[i] for i in sorted(rows)]]


def use_threads(engines: Sequence[Engine]) -> None:
    """First thing in each decoding thread: the checkpoints' intra-op threads."""
    for e in engines:
        if hasattr(e, "use_threads"):
            e.use_threads()


def create_app(engines: Sequence[Engine], limits: Limits = Limits(), defaults: Defaults = Defaults(),
               wait_ms: float = 5.0, batch_lines: int = 256, workers: int = 1) -> Starlette:
    """The ASGI app serving ``engines`` (ids 0..n-1); ``defaults``: the search of requests that name none."""

    def decode(key: Search, lines: Sequence[str]) -> list[dict]:
        return engines[key.model].translate(lines, key.beam, key.n_best, key.attention, alpha=key.alpha,
                                            beta=key.beta, stop=key.stop)

    batcher = Batcher(decode, wait_ms, batch_lines, limits.max_queue, workers, functools.partial(use_threads, engines))
    started = time.time()
    counts = {"requests": 0, "lines": 0, "errors": 0}

    async def translate(request: Request) -> JSONResponse:
        try:
            body = await read_body(request, limits.max_body)
            shape, queries = parse(body, limits, len(engines), defaults)
            results = await asyncio.gather(*(batcher.submit(q.key, q.texts, limits.timeout) for q in queries))
        except RequestError as e:
            return _error(counts, e.status, e.message)
        except QueueFull as e:
            return _error(counts, 429, f"queue: {e}")
        except asyncio.TimeoutError:
            return _error(counts, 408, f"timeout: no translation within {limits.timeout:g} s")
        except Exception as e:  # noqa: BLE001 - one failed request must not stop the server
            log.exception("translation failed")
            return _error(counts, 500, f"translation failed: {type(e).__name__}: {e}")
        counts["requests"] += 1
        counts["lines"] += sum(len(q.texts) for q in queries)
        return JSONResponse(answer(shape, queries, results))

    async def models(request: Request) -> JSONResponse:
        return JSONResponse([{"id": i, **e.info} for i, e in enumerate(engines)])

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "models": len(engines), "uptime_s": round(time.time() - started, 1),
                             "waiting_lines": batcher.waiting_lines, "batches": batcher.batches,
                             "decode_s": round(batcher.busy_s, 2), **counts})

    async def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    font = cjk_font()

    async def font_file(request: Request) -> FileResponse:
        if font is None:
            raise HTTPException(404, "no CJK font on the server (pip install 'nmt[plot]'); the browser's own fonts are used")
        return FileResponse(font, media_type="font/otf")

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": f"{request.method} {request.url.path}: {exc.detail}"}, exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        batcher.start()
        yield
        await batcher.stop()

    routes = [Route("/translate", translate, methods=["POST"]), Route("/models", models), Route("/health", health),
              Route("/", page), Route("/cjk-font", font_file), Mount("/static", StaticFiles(directory=STATIC), name="static")]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)


def cjk_font() -> str | None:
    """A font with Chinese glyphs for the page (the one attention plots use), or None."""
    try:
        from nmt.plot import find_cjk_font

        return find_cjk_font()
    except Exception:  # noqa: BLE001 - no font (or no matplotlib to look for one): the browser's fonts it is
        return None


def _error(counts: dict, status: int, message: str) -> JSONResponse:
    counts["errors"] += 1
    return JSONResponse({"error": message}, status)


def load_engines(runs: Sequence[str], onnx: Sequence[str], device: str, precision: str = "fp32",
                 threads: int = 0) -> list[Engine]:
    """Checkpoints first, then ONNX folders: their order gives the model ids. ``threads``: intra-op threads (0: all cores)."""
    from nmt.serve.engines import OnnxEngine, TorchEngine

    return [TorchEngine(r, device, precision, threads) for r in runs] + [OnnxEngine(o, threads) for o in onnx]


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nmt.serve", description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="run directories or checkpoint files (ids 0, 1, …)")
    p.add_argument("--onnx", nargs="+", default=[], metavar="DIR", help="nmt.export --format onnx folders (ids follow)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (checkpoints only)")
    # the choices of nmt.device.PRECISIONS, written out: this module imports no torch (an ONNX-only server)
    p.add_argument("--precision", choices=("fp32", "bf16", "bf16_output", "int8"), default="fp32",
                   help="checkpoints: decode in fp32 (default), bf16 autocast (faster in a warm process on GPUs and CPUs "
                        "with AMX/avx512_bf16, at large batches), bf16_output (only the vocabulary projection in bf16: "
                        "such CPUs, small batches too) or int8 (CPU only; nmt/int8.py); outputs may differ slightly")
    d = Defaults()
    p.add_argument("--beam", type=int, default=d.beam, help=f"beam size when a request gives none (default {d.beam})")
    p.add_argument("--alpha", type=float, default=d.alpha,
                   help=f"GNMT length penalty α, 0 to {ALPHA_MAX:g}, when a request gives none (default {d.alpha:g})")
    p.add_argument("--beta", type=float, default=d.beta,
                   help=f"GNMT coverage penalty β, 0 to {BETA_MAX:g}, when a request gives none (default {d.beta:g}: off)")
    p.add_argument("--stop", choices=STOPS, default=d.stop,
                   help=f"when a sentence's beam search ends, when a request gives none (default {d.stop}; nmt.translate)")
    p.add_argument("--batch-wait-ms", type=float, default=5.0,
                   help="how long to collect requests into a batch once a decoding thread is free")
    p.add_argument("--batch-lines", type=int, default=256, help="at most this many lines decoded in one call")
    p.add_argument("--workers", type=int, default=1,
                   help="decoding threads, each decoding its own batch with cores / workers intra-op threads "
                        "(default 1: one batch at a time on all cores)")
    lim = Limits()
    p.add_argument("--max-lines", type=int, default=lim.max_lines, help="lines per request")
    p.add_argument("--max-chars", type=int, default=lim.max_chars, help="characters per line")
    p.add_argument("--max-beam", type=int, default=lim.max_beam, help="largest beam a request may ask for")
    p.add_argument("--max-body", type=int, default=lim.max_body, help="bytes per request body")
    p.add_argument("--timeout", type=float, default=lim.timeout, help="seconds a request may wait for its answer")
    p.add_argument("--max-queue", type=int, default=lim.max_queue, help="lines waiting, all requests together")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if not args.models and not args.onnx:
        p.error("give at least one model: a run directory, a checkpoint or --onnx DIR")
    if args.workers < 1:
        p.error(f"--workers must be 1 or more, got {args.workers}")
    limits = Limits(args.max_lines, args.max_chars, args.max_beam, args.max_body, args.timeout, args.max_queue)
    defaults = Defaults(args.beam, args.alpha, args.beta, args.stop)
    try:
        check_defaults(defaults, limits)
    except RequestError as e:
        p.error(f"{e.message} (--max-beam {args.max_beam})" if e.message.startswith("--beam") else e.message)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        if args.models:
            from nmt.device import set_threads

            # Torch runs in the decoding threads alone. An OpenMP team of this thread's own would make
            # libgomp manage more threads than there are cores, and then it stops its teams' spin-waits:
            # every parallel op in the decoding threads would pay a wake-up (small ops 7 -> 90 µs, 2 cores).
            set_threads(1)
        engines = load_engines(args.models, args.onnx, args.device, args.precision, max(1, cores() // args.workers))
    except (OSError, ValueError, ImportError) as e:  # CheckpointError and ConfigError are ValueErrors
        print(f"nmt.serve: error: {e}", file=sys.stderr)
        return 1
    import uvicorn

    app = create_app(engines, limits, defaults, args.batch_wait_ms, args.batch_lines, args.workers)
    log.info("serving %d model(s) on http://%s:%d/ with %d decoding thread(s)", len(engines), args.host, args.port, args.workers)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
