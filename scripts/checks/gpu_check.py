"""The GPU path in one command (about 8 minutes on one GPU, offline): the CUDA tests, then speed.

    python scripts/checks/gpu_check.py --json gpu_check.json     # on a machine with an NVIDIA GPU
    python scripts/checks/gpu_check.py --smoke                   # a few steps of everything, any device

1. ``pytest -m cuda`` (tests/test_cuda.py). On a GPU the check fails if a test fails or is skipped; it
   prints the counts, and its time limit is 3 × the test times the last ``--json`` recorded, + 120 s.
2. bench-small (``+experiment=bench_small``) on the packaged Tatoeba corpus: training target
   tokens/s in fp32 and in bf16 (scripts/bench/benchmark.py measures, as for the CPU figures).
3. The paper's model (``+experiment=luong2015_wmt14``: 4 × 1000 LSTM, local-p general, 50K
   vocabularies) on synthetic batches of 128 sentences of 10-50 tokens: training target tokens/s
   and peak GPU memory in bf16, and the fraction of the GPU's measured bf16 matmul peak that
   its model FLOPs reach.
4. Greedy and beam-5 decoding of the dev split (1,000 sentences), sentences/s, with the bf16
   bench-small model after its measured steps: an undertrained model, whose outputs run longer
   than a trained one's (``--checkpoint RUN`` decodes a trained model instead).
5. The short recipe as users run it: ``python -m nmt.train +experiment=zh_en_local_p`` for two minutes (its
   2-layer decoder without input feeding, dropout 0.3): updates, target tokens/s, peak memory, best dev BLEU.

Without a GPU it stops with a message (``--smoke`` runs it on the CPU, small, to test the script).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.batching import epoch_batches, make_batch
from nmt.build import build_model
from nmt.checkpoint import load_model
from nmt.device import pick_device

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.benchmark import (  # noqa: E402
    compose_config,
    decoding_speed,
    matmul_peak_gflops,
    prepare_corpus,
    sync_device,
    training_speed,
)
from scripts.records.record import record, save  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# full run / smoke: warm-up and measured steps, synthetic pairs, dev sentences decoded
SIZES = {"full": dict(warmup=30, steps=200, paper_warmup=10, paper_steps=40, dev=1000),
         "smoke": dict(warmup=1, steps=2, paper_warmup=1, paper_steps=1, dev=8)}
SMOKE_DATA = ["data=hsk", "tokenizer.src_vocab_size=2000", "tokenizer.tgt_vocab_size=500", "data.dev_size=100",
              "data.test_size=100", "model.emb_size=32", "model.hidden_size=32"]
SMOKE_PAPER = ["model.emb_size=32", "model.hidden_size=32", "model.encoder_layers=2", "model.decoder_layers=2"]


FIRST_TIMEOUT = 900.0  # seconds for pytest -m cuda when no earlier run's test times are known


def tests_timeout(previous: Path) -> tuple[float, str]:
    """pytest's time limit: 3 × the CUDA tests' measured total in an earlier ``--json`` file, plus 120 s
    for start-up, else FIRST_TIMEOUT; and where the figure came from."""
    try:
        seconds = json.loads(previous.read_text())["tests"]["test_seconds"]
        return 3 * sum(seconds.values()) + 120, f"3 × the {sum(seconds.values()):.0f} s its tests took in {previous}, + 120 s"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return FIRST_TIMEOUT, f"no test times in {previous} yet: {FIRST_TIMEOUT:.0f} s"


def run_cuda_tests(timeout: float) -> dict:
    """``pytest -m cuda``: its summary line, exit status, seconds, the counts of passed, failed and skipped
    tests and each test's seconds (from pytest's JUnit XML report)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cuda.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "cuda", "tests/test_cuda.py", "-p", "no:cacheprovider",
               f"--junitxml={report}"]
        try:
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
            lines = proc.stdout.strip().splitlines()
            summary, status = (lines[-1] if lines else proc.stderr[-500:]), proc.returncode
            if status:
                print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
        except subprocess.TimeoutExpired:
            summary, status = f"timed out after {timeout:.0f} s", -1
        counts, seconds = junit_counts(report)
    return {"summary": summary, "exit": status, "seconds": time.perf_counter() - t0, **counts, "test_seconds": seconds}


def junit_counts(report: Path) -> tuple[dict, dict]:
    """Counts (tests, passed, failed, skipped) and each test's seconds from a JUnit XML report (zeros if none)."""
    counts, seconds = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0}, {}
    if not report.exists():
        return counts, seconds
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = ("skipped" if case.find("skipped") is not None else
                   "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
        counts["tests"] += 1
        counts[outcome] += 1
        seconds[case.get("name", "?")] = float(case.get("time", 0.0))
    return counts, seconds


def tests_verdict(tests: dict, on_gpu: bool) -> Optional[str]:
    """Why the CUDA tests fail the check, or None: a failure, a time-out, or, on a GPU, any test skipped
    (a check whose every test was skipped checked nothing)."""
    if tests["exit"] not in (0, 5):
        return f"pytest -m cuda: {tests['summary']}"
    if on_gpu and (tests["skipped"] or not tests["passed"]):
        return f"pytest -m cuda on a GPU: {tests['skipped']} of {tests['tests']} tests skipped, {tests['passed']} passed"
    return None


def as_training_builds(cfg, src_vocab: int, tgt_vocab: int, device: torch.device):
    """The model as nmt.train builds it: the training path's ops, the loop step compiled where trainer.compile
    (auto: on CUDA) says so."""
    compile_step = bool(cfg.trainer.compile)
    return build_model(cfg.model, src_vocab, tgt_vocab, "fast", compile_step).to(device).train(), compile_step


def bench_small(precision: str, size: dict, device: torch.device, smoke: bool, checkpoint: str = "",
                compile_: str = "null", profile_steps: int = 0) -> dict:
    """bench-small training speed in ``precision`` (and, with ``size['dev']``, decoding speed; with
    ``profile_steps``, a torch.profiler record of that many more training steps)."""
    cfg = compose_config("bench_small", [f"trainer.precision={precision}", f"trainer.device={device.type}",
                                         f"trainer.compile={compile_}", *(SMOKE_DATA if smoke else [])])
    torch.manual_seed(cfg.trainer.seed)
    corpus = prepare_corpus(cfg)
    tok = corpus.tokenizer
    model, compiled = as_training_builds(cfg, tok.src_vocab_size, tok.tgt_vocab_size, device)
    rng, batches = random.Random(cfg.trainer.seed), []
    while len(batches) < size["warmup"] + size["steps"] + profile_steps:
        batches += epoch_batches(corpus.train, cfg.trainer.batch_tokens, rng)
    out = {"train": {**training_speed(model, cfg, batches[: size["warmup"] + size["steps"]], size["warmup"], device),
                     "compile": compiled}}
    if profile_steps:
        end = size["warmup"] + size["steps"]
        out["profile"] = profile_training(model, cfg, batches[end: end + profile_steps], device)
    if size.get("decode"):
        dev = corpus.dev.select(range(min(size["dev"], len(corpus.dev))))
        dec_model, dec_tok, dec_cfg = (load_model(checkpoint, device)[:3] if checkpoint else (model, tok, cfg))
        out["decode"] = decoding_speed(dec_model, dec_tok, dec_cfg, list(dev["src"]), list(dev["tgt"]), device,
                                       runs=(("greedy", 1, "full"), ("beam5", 5, "full")))
    return out


def profile_training(model, cfg, batches: list, device: torch.device, rows: int = 12) -> dict:
    """torch.profiler over ``batches`` of training: wall and device milliseconds a step (their ratio is how busy
    the GPU is), kernel launches a step, and the ops with the most self CPU and self device time."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync_device(device)
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        training_speed(model, cfg, batches, 0, device)
    wall_ms = (time.perf_counter() - t0) * 1000 / len(batches)
    events = list(prof.key_averages())
    device_ms = sum(e.self_device_time_total for e in events) / 1000 / len(batches)
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))

    def top(attr: str) -> list[dict]:
        ranked = sorted((e for e in events if getattr(e, attr) > 0), key=lambda e: getattr(e, attr), reverse=True)
        return [{"op": e.key, "ms_per_step": getattr(e, attr) / 1000 / len(batches), "calls_per_step": e.count / len(batches)}
                for e in ranked[:rows]]

    return {"steps": len(batches), "wall_ms_per_step": wall_ms, "device_ms_per_step": device_ms,
            "device_busy": device_ms / wall_ms, "kernel_launches_per_step": launches / len(batches),
            "top_cpu": top("self_cpu_time_total"), "top_device": top("self_device_time_total")}


def paper_model(size: dict, device: torch.device, smoke: bool, compile_: str = "null", precision: str = "bf16") -> dict:
    """The 4 × 1000 local-p model in ``precision`` on synthetic batches of 128 sentences (50K vocabularies)."""
    cfg = compose_config("luong2015_wmt14", [f"trainer.precision={precision}", f"trainer.device={device.type}",
                                             f"trainer.compile={compile_}", *(SMOKE_PAPER if smoke else [])])
    vocab = 500 if smoke else cfg.tokenizer.src_vocab_size
    torch.manual_seed(cfg.trainer.seed)
    model, compiled = as_training_builds(cfg, vocab, vocab, device)
    rng = random.Random(0)
    sents = cfg.trainer.batch_sentences

    def pieces() -> list[int]:
        return [rng.randrange(4, vocab) for _ in range(rng.randint(10, cfg.data.max_tokens - 1))]

    batches = []
    for _ in range(size["paper_warmup"] + size["paper_steps"]):
        src = [pieces() for _ in range(sents)]
        batches.append(make_batch(src, [pieces() for _ in range(sents)], range(sents)))
    train = training_speed(model, cfg, batches, size["paper_warmup"], device)
    peak = matmul_peak_gflops(torch.bfloat16, 256 if smoke else 8192, 2 if smoke else 20, device)
    train.update(vocab=vocab, bf16_matmul_peak_gflops=peak, bf16_peak_fraction=train["model_gflops"] / peak,
                 compile=compiled)
    return train


def recipe_run(smoke: bool) -> dict:
    """``nmt.train +experiment=zh_en_local_p`` for two minutes (smoke: a few steps on HSK), as a user runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        budget = ["trainer.max_minutes=0", "trainer.max_steps=4", "trainer.valid_every=4", *SMOKE_DATA] if smoke \
            else ["trainer.max_minutes=2"]
        proc = subprocess.run([sys.executable, "-m", "nmt.train", "+experiment=zh_en_local_p", "trainer.test_beam=0",
                               *budget, f"hydra.run.dir={tmp}/run"], cwd=REPO, capture_output=True, text=True)
        if proc.returncode:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        m = json.loads((Path(tmp) / "run" / "metrics.json").read_text())
    return {"steps": m["steps"], "tgt_tok_per_s": m["train_tgt_tok_per_s"], "peak_memory_mb": m["peak_memory_mb"],
            "best_dev_bleu": m["best_valid_bleu"], "precision": m.get("precision")}


def table(result: dict) -> str:
    rows = [("CUDA tests", result["tests"]["summary"] if result.get("tests") else "not run")]
    for p in ("fp32", "bf16"):
        t = result[f"bench_small_{p}"]["train"]
        rows.append((f"bench-small train {p}", f"{t['tgt_tok_per_s']:,.0f} tgt tok/s ({t['mean_batch_sents']:.0f} sents/batch, "
                                               f"compiled step: {t['compile']})"))
    rows.append(("bench-small auto chose", result["bench_small_auto"]["train"]["precision"]))
    rows.append(("paper 4x1000 train fp32", f"{result['paper_fp32']['tgt_tok_per_s']:,.0f} tgt tok/s"))
    t = result["paper_bf16"]
    mem = f"{t['peak_gpu_mb']:,.0f} MB" if t["peak_gpu_mb"] is not None else "n/a (CPU)"
    rows += [("paper 4x1000 train bf16", f"{t['tgt_tok_per_s']:,.0f} tgt tok/s, batch {t['mean_batch_sents']:.0f}, "
                                         f"vocab {t['vocab']:,}"),
             ("paper 4x1000 peak memory", mem),
             ("paper 4x1000 model FLOPs", f"{t['model_gflops']:,.0f} GFLOP/s = {t['bf16_peak_fraction']:.1%} of the "
                                          f"measured {t['bf16_matmul_peak_gflops']:,.0f} GFLOP/s bf16 matmul peak")]
    if "profile" in result["bench_small_fp32"]:
        f = result["bench_small_fp32"]["profile"]
        rows.append(("bench-small fp32 profile", f"{f['wall_ms_per_step']:.1f} ms a step, device busy {f['device_busy']:.0%}, "
                                                 f"{f['kernel_launches_per_step']:,.0f} kernel launches a step"))
    r = result.get("zh_en_local_p", {})
    rows.append(("zh_en_local_p, 2 minutes", r.get("error") or f"{r['steps']:,} updates, {r['tgt_tok_per_s']:,.0f} tgt tok/s, "
                 f"peak {r['peak_memory_mb']:,.0f} MB, best dev BLEU {r['best_dev_bleu']:.2f}"))
    for name, d in result["bench_small_bf16"].get("decode", {}).items():
        rows.append((f"decode {name} (dev)", f"{d['sents_per_s']:,.0f} sents/s, BLEU {d['bleu']:.2f}"))
    width = max(len(k) for k, _ in rows) + 2
    return "\n".join(f"{k:<{width}}{v}" for k, v in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default="gpu_check.json", help="write the figures here")
    p.add_argument("--smoke", action="store_true", help="a few steps of everything, also on the CPU")
    p.add_argument("--skip-tests", action="store_true", help="measure only")
    p.add_argument("--tests-timeout", type=float, default=0,
                   help="seconds for pytest -m cuda (default: 3 × the test times in --json from an earlier run, + 120)")
    p.add_argument("--checkpoint", default="", help="decode this trained run instead of the benchmarked model")
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="trainer.compile for the training figures (auto: as training decides)")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="also profile this many bench-small fp32 training steps (torch.profiler)")
    args = p.parse_args()
    if not torch.cuda.is_available() and not args.smoke:
        print("gpu_check: no CUDA GPU is visible, nothing measured (--smoke runs a small version on the CPU)",
              file=sys.stderr)
        return 1
    device = pick_device("auto" if torch.cuda.is_available() else "cpu")
    size = SIZES["smoke" if args.smoke else "full"]
    t0 = time.perf_counter()
    result = record({"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                     "torch": torch.__version__, "smoke": args.smoke})
    if not args.skip_tests:
        timeout, why = (args.tests_timeout, "--tests-timeout") if args.tests_timeout else tests_timeout(Path(args.json))
        print(f"pytest -m cuda, time limit {timeout:.0f} s ({why})", flush=True)
        result["tests"] = run_cuda_tests(timeout)
        t = result["tests"]
        print(f"CUDA tests: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped of {t['tests']} "
              f"in {t['seconds']:.0f} s", flush=True)
    comp = {"auto": "null", "on": "true", "off": "false"}[args.compile]
    result["bench_small_fp32"] = bench_small("fp32", size, device, args.smoke, compile_=comp, profile_steps=args.profile)
    result["bench_small_bf16"] = bench_small("bf16", {**size, "decode": True}, device, args.smoke, args.checkpoint, comp)
    result["bench_small_auto"] = bench_small("auto", size, device, args.smoke, compile_=comp)
    result["paper_bf16"] = paper_model(size, device, args.smoke, comp)
    result["paper_fp32"] = paper_model(size, device, args.smoke, comp, "fp32")
    result["zh_en_local_p"] = recipe_run(args.smoke)
    result["seconds"] = time.perf_counter() - t0
    print(table(result))
    print(f"{'total':<26}{result['seconds']:.0f} s on {result['device']}")
    save(args.json, result)
    verdict = tests_verdict(result["tests"], device.type == "cuda") if "tests" in result else None
    if verdict:
        print(f"gpu_check: FAILED: {verdict}", file=sys.stderr)
    return 1 if verdict else 0


if __name__ == "__main__":
    sys.exit(main())
