"""Shared fixtures: one sentencepiece cache per session, tiny models, and one trained run.

Everything here is CPU-only, seeded and offline. ``trained_run`` trains a real (tiny) model
once with the real CLI; the CLI tests share it. The in-process ``hsk_tokenizer`` uses the same
data and tokenizer settings as that run, so sentencepiece trains once per session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import pytest
import torch
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]

# One data/tokenizer setup for the whole session (CLI run and in-process tests alike).
HSK_DEV, HSK_TEST = 100, 100
SRC_VOCAB, TGT_VOCAB = 2000, 500  # the Chinese side needs ~1,750 pieces just for its characters
TRAIN_SEED = 42  # trainer.seed default: the tokenizer cache key includes it

TRAIN_OVERRIDES = [
    "+experiment=zh_en_local_p",
    "data=hsk",  # the small corpus keeps the suite fast; the packaged Tatoeba corpus has its own tests
    # the shared run keeps the settings its assertions were written for, not the short-budget recipe
    "model.input_feeding=true", "tokenizer.byte_fallback=false", "trainer.schedule=constant", "trainer.lr=0.001",
    "trainer.warmup_steps=0", "trainer.label_smoothing=0",
    "model.emb_size=32",
    "model.hidden_size=32",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    f"tokenizer.src_vocab_size={SRC_VOCAB}",
    f"tokenizer.tgt_vocab_size={TGT_VOCAB}",
    f"data.dev_size={HSK_DEV}",
    f"data.test_size={HSK_TEST}",
    "trainer.device=cpu",
    "trainer.max_steps=30",
    "trainer.valid_every=15",
    "trainer.log_every=10",
    "trainer.max_minutes=0",
    "trainer.test_beam=2",
]


def _one_core_per_worker() -> None:
    """Under pytest-xdist each worker, and every process it starts, runs on cores of its own: two workers with two
    intra-op threads each on two cores spin against each other (the digit-learning tests took 49 s in the suite
    against 8 s alone). The CLIs give themselves a thread per core of their affinity mask (``nmt.device``)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if not worker or count < 2 or len(cores) < count:
        return
    mine = cores[int(worker.removeprefix("gw")) % count :: count]
    os.sched_setaffinity(0, mine)  # this thread; the processes and threads it starts inherit it
    torch.set_num_threads(len(mine))


_one_core_per_worker()


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked ``cuda`` are skipped where no GPU is visible."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def nmt_cache(tmp_path_factory) -> Path:
    """$NMT_CACHE points at one session-wide temporary folder, for in-process code and subprocesses."""
    cache = tmp_path_factory.mktemp("nmt_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("NMT_CACHE", str(cache))
    yield cache
    mp.undo()


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same torch RNG state."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def cli_env(nmt_cache) -> dict:
    env = dict(os.environ, NMT_CACHE=str(nmt_cache), CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
    env.pop("HYDRA_FULL_ERROR", None)
    return env


@pytest.fixture(scope="session")
def run_cli(cli_env) -> Callable[..., subprocess.CompletedProcess]:
    """``run_cli("nmt.translate", arg, ..., input=str)``: run a module as a subprocess, capture text."""

    def run(module: str, *args: str, input: Optional[str] = None, cwd: Optional[Path] = None,
            timeout: float = 240, input_bytes: Optional[bytes] = None) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", module, *map(str, args)]
        if input_bytes is None:
            return subprocess.run(cmd, input=input, capture_output=True, text=True, cwd=str(cwd or REPO),
                                  env=cli_env, timeout=timeout)
        proc = subprocess.run(cmd, input=input_bytes, capture_output=True, cwd=str(cwd or REPO), env=cli_env,
                              timeout=timeout)
        proc.stdout = proc.stdout.decode("utf-8", errors="replace")
        proc.stderr = proc.stderr.decode("utf-8", errors="replace")
        return proc

    return run


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, run_cli) -> Path:
    """A run directory written by ``python -m nmt.train`` (30 steps of a 32-unit local-p model)."""
    run_dir = tmp_path_factory.mktemp("runs") / "local_p"
    proc = run_cli("nmt.train", *TRAIN_OVERRIDES, f"hydra.run.dir={run_dir}", timeout=400)
    assert proc.returncode == 0, describe(proc)
    return run_dir


# --------------------------------------------------------------------------- in-process helpers
@pytest.fixture(scope="session")
def hsk_cfg():
    """The typed training config matching ``TRAIN_OVERRIDES`` (data and tokenizer parts)."""
    from nmt.config import TrainConfig

    cfg = OmegaConf.structured(TrainConfig)
    cfg.data.source = "hsk"
    cfg.data.dev_size, cfg.data.test_size = HSK_DEV, HSK_TEST
    cfg.tokenizer.src_vocab_size, cfg.tokenizer.tgt_vocab_size = SRC_VOCAB, TGT_VOCAB
    return cfg


@pytest.fixture(scope="session")
def hsk_corpus(hsk_cfg):
    from nmt.data.corpus import load_corpus

    return load_corpus(hsk_cfg.data, need=("train", "dev", "test"))


@pytest.fixture(scope="session")
def hsk_tokenizer(hsk_cfg, hsk_corpus):
    from nmt.tokenizer import load_or_train

    train = hsk_corpus["train"]
    return load_or_train(hsk_cfg.tokenizer, list(train["src"]), list(train["tgt"]), seed=TRAIN_SEED)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory) -> Path:
    """A files corpus: space-separated digit strings and their reversals (train/dev/test); ``helpers.digits_cfg``
    trains on it."""
    from helpers import digit_strings

    folder = tmp_path_factory.mktemp("digits")
    for split, n, seed in (("train", 1500, 1), ("dev", 40, 2), ("test", 40, 3)):
        src = [[str(d - 4) for d in s] for s in digit_strings(n, seed, 3, 7)]
        (folder / f"{split}.zh").write_text("".join(" ".join(s) + "\n" for s in src))
        (folder / f"{split}.en").write_text("".join(" ".join(s[::-1]) + "\n" for s in src))
    return folder


@pytest.fixture(scope="session")
def make_model():
    """``make_model(**overrides)``: a seeded tiny Seq2Seq in eval mode (no dropout)."""
    from nmt.build import build_model
    from nmt.config import ModelConfig

    def make(src_vocab: int = 23, tgt_vocab: int = 19, seed: int = 0, train: bool = False, engine: str = "fast",
             gather_above: float = 20.0, compile_step: bool = False, **kw):
        attention = {k: kw.pop(k) for k in ("score", "mode", "window", "heads") if k in kw}
        base = dict(emb_size=16, hidden_size=16, encoder_layers=1, decoder_layers=1, dropout=0.0)
        cfg = OmegaConf.structured(ModelConfig(**{**base, **kw}))
        for k, v in attention.items():
            cfg.attention[k] = v
        torch.manual_seed(seed)
        model = build_model(cfg, src_vocab, tgt_vocab, engine, compile_step, gather_above)  # nmt/build.py
        return model.train(train)

    return make


@pytest.fixture(scope="session")
def random_sources():
    """``random_sources(n, lo, hi, vocab, seed)``: lists of token ids (no specials) of mixed lengths."""
    import random

    def make(n: int, lo: int, hi: int, vocab: int, seed: int = 0) -> list[list[int]]:
        rng = random.Random(seed)
        return [[rng.randrange(4, vocab) for _ in range(rng.randint(lo, hi))] for _ in range(n)]

    return make


@pytest.fixture(scope="session")
def train_overrides() -> list[str]:
    """The command-line overrides of the shared tiny run (append more to change it)."""
    return list(TRAIN_OVERRIDES)


@pytest.fixture(scope="session")
def explain() -> Callable[[subprocess.CompletedProcess], str]:
    """Formats a finished subprocess for an assertion message."""
    return describe


@pytest.fixture
def cuda_untouchable(monkeypatch) -> None:
    """A machine whose CUDA is available but must not be touched: pinning memory or initializing
    CUDA raise (on a real GPU machine either opens a context on GPU 0)."""

    def touched(*args, **kwargs):
        raise AssertionError("a CPU run touched CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "_lazy_init", touched)
    monkeypatch.setattr(torch.Tensor, "pin_memory", touched)


# --------------------------------------------------------------------------- HTTP servers on 127.0.0.1
@pytest.fixture
def free_port() -> int:
    """A TCP port free on the loopback address right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Http:
    """Tiny JSON client for the tests' local servers (no proxy, nothing leaves 127.0.0.1)."""

    @staticmethod
    def request(url: str, body: Optional[bytes] = None, timeout: float = 120) -> tuple[int, object]:
        import json
        import urllib.error
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"} if body else {})
        try:
            with opener.open(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode("utf-8", errors="replace")

    def get(self, url: str) -> tuple[int, object]:
        return self.request(url)

    def post(self, url: str, payload: object) -> tuple[int, object]:
        import json

        return self.request(url, json.dumps(payload, ensure_ascii=False).encode("utf-8"))

    def wait_until_up(self, url: str, proc: subprocess.Popen, seconds: float = 180) -> None:
        """Poll ``url/health`` until it answers; fail early if the server process ended."""
        import time

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise AssertionError(f"server exited with {proc.returncode}:\n{out[-3000:]}")
            try:
                if self.get(url + "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"server at {url} did not answer within {seconds} s")


@pytest.fixture(scope="session")
def http() -> Http:
    return Http()


def _start_server(args: list[str], env: dict, port: int, prelude: str = "") -> subprocess.Popen:
    """``python -m nmt.serve ARGS --port PORT`` (after ``prelude`` Python code) as a child process."""
    script = prelude + ("import runpy, sys; sys.argv = ['nmt.serve', *sys.argv[1:]]\n"
                        "runpy.run_module('nmt.serve', run_name='__main__')\n")
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args), "--port", str(port)], env=env, cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="session")
def start_server() -> Callable[..., subprocess.Popen]:
    """``start_server(args, env, port, prelude="")``: an ``nmt.serve`` child process (stop it yourself)."""
    return _start_server


@pytest.fixture(scope="session")
def server(trained_run, cli_env, http):
    """URL of one ``nmt.serve`` of the shared run, as models 0 and 1, with small limits (shared by the session)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [trained_run, trained_run, "--device", "cpu", "--beam", "2", "--batch-wait-ms", "30", "--workers", "2",
            "--max-lines", "8", "--max-chars", "200", "--max-body", "300000", "--timeout", "120"]
    proc = _start_server(args, cli_env, port)
    url = f"http://127.0.0.1:{port}"
    try:
        http.wait_until_up(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
