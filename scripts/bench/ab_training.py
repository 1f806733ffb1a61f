"""Training variants side by side: target tokens/s and peak memory of each, in alternating rounds, as a record.

    python scripts/bench/ab_training.py --data ../shared/data/tatoeba-cmn-eng --rounds 3 \\
        --variant eager: --variant compiled:trainer.compile=true --json docs/results/ab_train_compile.json
    python scripts/bench/ab_training.py --variant fp32:trainer.precision=fp32 --variant bf16:trainer.precision=bf16

A variant is ``NAME:override,override,...`` (config overrides of ``--config``; none after the colon: the config as
it is); an item ``env.KEY=VALUE`` sets an environment variable of its passes instead (e.g.
``env.ONEDNN_PRIMITIVE_CACHE_CAPACITY=0``). Each pass is ``scripts/bench/benchmark.py --no-decode`` in a process
of its own (the same batches, warm-up and timed steps for every variant), every round measures every variant, in
reverse order every other round (timing.py): the ratios to the first variant are taken round by round, and the
record keeps every pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.bench.timing import alternate  # noqa: E402
from scripts.records.record import cpu, record, save  # noqa: E402


def variant(text: str) -> tuple[str, list[str]]:
    """``NAME:o1,o2`` -> (NAME, [o1, o2])."""
    name, sep, rest = text.partition(":")
    if not name or not sep:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: give NAME:override,override (or NAME: for none)")
    return name, [o for o in rest.split(",") if o]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="bench_small", help="experiment name under configs/experiment/")
    p.add_argument("--data", help="folder with train/dev.{zh,en} (default: the packaged Tatoeba corpus)")
    p.add_argument("--variant", type=variant, action="append", required=True, help="NAME:override,... (repeat)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    variants = dict(args.variant)
    if len(variants) != len(args.variant):
        p.error("--variant: two variants share a name")

    def measure(name: str) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "bench.json"
            items = variants[name]
            env = dict(os.environ, **dict(o[4:].split("=", 1) for o in items if o.startswith("env.")))
            cmd = [sys.executable, str(ROOT / "scripts/bench/benchmark.py"), "--config", args.config, "--no-decode",
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--json", str(out),
                   *(["--data", args.data] if args.data else []), *(o for o in items if not o.startswith("env."))]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
            if proc.returncode:
                raise SystemExit(f"variant {name!r} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            t = json.loads(out.read_text())["train"]
        row = {"tgt_tok_per_s": t["tgt_tok_per_s"], "peak_rss_mb": t["peak_rss_mb"],
               "matmul_peak_fraction": t["matmul_peak_fraction"]}
        print(name, {k: round(v, 3) for k, v in row.items()}, flush=True)
        return row

    runs = alternate(list(variants), args.rounds, measure)
    base = next(iter(variants))
    summary = {}
    for name, rows in runs.items():
        ratios = [r["tgt_tok_per_s"] / b["tgt_tok_per_s"] for r, b in zip(rows, runs[base])]
        summary[name] = {"overrides": variants[name],
                         "median_tgt_tok_per_s": statistics.median(r["tgt_tok_per_s"] for r in rows),
                         "max_peak_rss_mb": max(r["peak_rss_mb"] for r in rows), "ratios_to_first": ratios,
                         "median_ratio": statistics.median(ratios)}
        print(f"{name:<16} {summary[name]['median_tgt_tok_per_s']:8,.0f} tgt tok/s  x{summary[name]['median_ratio']:.2f} "
              f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})  peak {summary[name]['max_peak_rss_mb']:,.0f} MB")
    print(cpu())
    save(args.json, record({"config": args.config, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
                            "variants": summary, "passes": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
