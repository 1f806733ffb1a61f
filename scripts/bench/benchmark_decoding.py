"""Decoding precisions side by side on one trained model: BLEU and sentences/s per split, beam and batch size, the
precisions alternating round by round (the machine's speed drifts), each pass in a process of its own, as a user
runs one precision (fbgemm's int8 and oneDNN's fp32 kernels in one process slowed int8 to 0.8x), written as a record.

    python scripts/bench/benchmark_decoding.py RUN --precisions fp32,int8 --json docs/results/decode_int8.json
    python scripts/bench/benchmark_decoding.py RUN --precisions fp32,bf16_output,int8 --beams 1,5 --batch-sentences 1000,16

``int8_7bit`` (for ``--precisions`` only) is int8 with torch's own 7-bit activations (its dynamic ``Linear``'s
``reduce_range``), whatever this CPU allows (nmt/int8.py: ``full_range``).

``--batch-sentences 16`` decodes in batches of at most 16 sentences, as the server's micro-batches of concurrent
requests are (nmt.serve: up to --max-batch sentences, often fewer); 1000 is nmt.evaluate's default.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from nmt.data.corpus import load_corpus
from nmt.device import PRECISIONS, set_threads
from nmt.metrics import score
from nmt.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.timing import alternate, child_json  # noqa: E402
from scripts.records.record import record, save  # noqa: E402


def csv(kind):
    return lambda v: [kind(x) for x in v.split(",")]


def one_pass(args) -> dict:
    """In this process: one precision's BLEU and seconds for every (split, beam, batch) after a warm-up."""
    set_threads(args.threads)
    if args.one == "int8_7bit":
        import nmt.int8

        nmt.int8.full_range = lambda flags=None: False  # every int8 Linear built from here on keeps 7 bits
    t = Translator.load(args.model, "cpu", "int8" if args.one == "int8_7bit" else args.one)
    data = load_corpus(t.config.data, need=tuple(args.splits), splits=tuple(args.splits))
    sets = {s: (list(data[s]["src"]), list(data[s]["tgt"])) for s in args.splits}
    t.translate(sets[args.splits[0]][0][:64], beam=max(args.beams))  # warm-up: caches, oneDNN primitives, packing
    out = {"threads": torch.get_num_threads(), "runs": []}
    for split, beam, n in [(s, b, n) for s in args.splits for b in args.beams for n in args.batch_sentences]:
        src, ref = sets[split]
        t0 = time.perf_counter()
        hyps = t.translate(src, beam=beam, batch_sentences=n)
        seconds = time.perf_counter() - t0
        out["runs"].append({"split": split, "beam": beam, "batch_sentences": n, "sentences": len(src), "seconds": seconds,
                            "bleu": score([h.text for h in hyps], [ref], t.tgt_lang).bleu})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory or checkpoint")
    p.add_argument("--precisions", type=csv(str), default=["fp32", "int8"], help="comma-separated (default fp32,int8)")
    p.add_argument("--splits", type=csv(str), default=["dev", "test"], help="corpus splits (default dev,test)")
    p.add_argument("--beams", type=csv(int), default=[5], help="beam sizes (default 5; 1 = greedy)")
    p.add_argument("--batch-sentences", type=csv(int), default=[1000], help="sentences per batch at most (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds, precisions alternating (default 3)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (default: all cores)")
    p.add_argument("--json", type=Path, help="write the record here")
    p.add_argument("--one", help=argparse.SUPPRESS)  # internal: one precision's pass, in a process of its own
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_pass(args)))
        return 0
    if bad := [x for x in args.precisions if x not in (*PRECISIONS, "int8_7bit")]:
        p.error(f"--precisions: {', '.join(bad)} not in {', '.join(PRECISIONS)}, int8_7bit")
    # each precision in a fresh process, as a user runs one: two libraries' thread pools in one process slow both
    common = ["--splits", ",".join(args.splits), "--beams", ",".join(map(str, args.beams)),
              "--batch-sentences", ",".join(map(str, args.batch_sentences)), "--threads", str(args.threads)]
    passes = alternate(args.precisions, args.rounds, lambda prec: child_json(
        [sys.executable, __file__, str(args.model), "--one", prec, *common], f"{prec} pass"))
    rows = []
    for prec, ps in passes.items():
        for i, run in enumerate(ps[0]["runs"]):
            times = [q["runs"][i]["seconds"] for q in ps]
            rows.append({"precision": prec, **{k: run[k] for k in ("split", "beam", "batch_sentences", "sentences", "bleu")},
                         "seconds": times, "sents_per_s": run["sentences"] / statistics.median(times)})
    rec = record({"model": str(args.model), "threads": passes[args.precisions[0]][0]["threads"], "rounds": args.rounds,
                  "rows": rows})
    base = {(r["split"], r["beam"], r["batch_sentences"]): r for r in rows if r["precision"] == args.precisions[0]}
    for r in rows:
        b = base[(r["split"], r["beam"], r["batch_sentences"])]
        r["speed_vs_first"], r["bleu_vs_first"] = r["sents_per_s"] / b["sents_per_s"], r["bleu"] - b["bleu"]
    save(args.json, rec)
    for r in rows:
        print(f"{r['precision']:<12} {r['split']:<5} beam {r['beam']} batch {r['batch_sentences']:>5}: BLEU {r['bleu']:.2f} "
              f"({r['bleu_vs_first']:+.2f}), {r['sents_per_s']:,.1f} sents/s ({r['speed_vs_first']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
