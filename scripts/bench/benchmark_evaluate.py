"""``nmt.evaluate`` as a user runs it, one precision against another: the command itself in a process of its own per
pass, the precisions alternating round by round (the machine's speed drifts), its own ``sent/s`` (decoding,
tokenizing, detokenizing and scoring; no start-up or model loading) and BLEU, written as a record.

    python scripts/bench/benchmark_evaluate.py RUN --splits dev,test --beam 5 --precisions fp32,int8 --rounds 3 \\
        --json docs/results/evaluate_int8_local_p_15min.json

``scripts/bench/benchmark_decoding.py`` times the decoding alone, per batch size, after a warm-up; this script times what
``nmt.evaluate`` reports, cold, once per process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from nmt.device import PRECISIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.bench.timing import alternate, child_json  # noqa: E402
from scripts.records.record import record, save  # noqa: E402


def evaluate_once(model: str, splits: list[str], beam: int, precision: str) -> list[dict]:
    """One ``python -m nmt.evaluate MODEL --split S1 [--split S2 …] --beam B --precision P --json`` run: a row per split."""
    cmd = [sys.executable, "-m", "nmt.evaluate", model, *[a for s in splits for a in ("--split", s)], "--beam", str(beam),
           "--precision", precision, "--json"]
    rows = child_json(cmd, f"nmt.evaluate --precision {precision}", cwd=ROOT)
    return rows if isinstance(rows, list) else [rows]


def summarize(passes: dict[str, list[list[dict]]]) -> list[dict]:
    """Per precision and set: BLEU, each pass's sentences/s, their median, and the changes against the first
    precision's (its BLEU, its median)."""
    rows = []
    for prec, ps in passes.items():
        for i, first in enumerate(ps[0]):
            speeds = [p[i]["sentences_per_s"] for p in ps]
            rows.append({"precision": prec, "set": first["set"], "sentences": first["sentences"], "bleu": first["bleu"],
                         "chrf": first["chrf"], "sents_per_s": speeds, "median": statistics.median(speeds)})
    base = {r["set"]: r for r in rows[: len(rows) // len(passes)]}
    for r in rows:
        b = base[r["set"]]
        r["speed_vs_first"], r["bleu_vs_first"] = r["median"] / b["median"], r["bleu"] - b["bleu"]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory or checkpoint")
    p.add_argument("--splits", default="test", help="comma-separated corpus splits (default test)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--precisions", default="fp32,int8", help="comma-separated (default fp32,int8); the first is the base")
    p.add_argument("--rounds", type=int, default=3, help="passes per precision, alternating (default 3)")
    p.add_argument("--json", type=Path, help="write the record here")
    args = p.parse_args(argv)
    precisions = args.precisions.split(",")
    if bad := [x for x in precisions if x not in PRECISIONS]:
        p.error(f"--precisions: {', '.join(bad)} not in {', '.join(PRECISIONS)}")
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    def one(prec: str) -> list[dict]:
        sets = evaluate_once(str(args.model), args.splits.split(","), args.beam, prec)
        print(f"{prec}: " + ", ".join(f"{x['set']} BLEU {x['bleu']:.2f} {x['sentences_per_s']:.1f} sents/s" for x in sets),
              flush=True)
        return sets

    passes = alternate(precisions, args.rounds, one)
    rows = summarize(passes)
    for x in rows:
        print(f"{x['precision']:<12} {x['set']:<6} BLEU {x['bleu']:.2f} ({x['bleu_vs_first']:+.2f}), "
              f"median {x['median']:.1f} sents/s ({x['speed_vs_first']:.2f}x)")
    if args.json:
        save(args.json, record({"model": str(args.model), "splits": args.splits.split(","), "beam": args.beam,
                                "rounds": args.rounds, "rows": rows}, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
