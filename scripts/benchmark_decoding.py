"""Decoding precisions side by side on one trained model: BLEU and sentences/s per split, beam and batch size, the
precisions alternating round by round in one process (the machine's speed drifts), written as a record.

    python scripts/benchmark_decoding.py RUN --precisions fp32,int8 --json docs/results/decode_int8.json
    python scripts/benchmark_decoding.py RUN --precisions fp32,bf16_output,int8 --beams 1,5 --batch-sentences 1000,16

``--batch-sentences 16`` decodes in batches of at most 16 sentences, as the server's micro-batches of concurrent
requests are (nmt.serve: up to --max-batch sentences, often fewer); 1000 is nmt.evaluate's default.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from nmt.data.corpus import load_corpus
from nmt.device import PRECISIONS, cpu_info, set_threads
from nmt.metrics import score
from nmt.run_folder import git_commit
from nmt.translator import Translator


def csv(kind):
    return lambda v: [kind(x) for x in v.split(",")]


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
    args = p.parse_args()
    if bad := [x for x in args.precisions if x not in PRECISIONS]:
        p.error(f"--precisions: {', '.join(bad)} not in {', '.join(PRECISIONS)}")
    set_threads(args.threads)
    translators = {prec: Translator.load(args.model, "cpu", prec) for prec in args.precisions}
    first = next(iter(translators.values()))
    data = load_corpus(first.config.data, need=tuple(args.splits), splits=tuple(args.splits))
    sets = {s: (list(data[s]["src"]), list(data[s]["tgt"])) for s in args.splits}
    runs = [(s, b, n) for s in args.splits for b in args.beams for n in args.batch_sentences]
    for t in translators.values():  # warm-up: caches, oneDNN primitives, packed weights
        t.translate(sets[args.splits[0]][0][:64], beam=max(args.beams))
    seconds: dict = {}
    bleu: dict = {}
    for r in range(args.rounds):
        order = list(translators.items())
        for prec, t in order if r % 2 == 0 else order[::-1]:
            for split, beam, n in runs:
                src, ref = sets[split]
                t0 = time.perf_counter()
                out = t.translate(src, beam=beam, batch_sentences=n)
                seconds.setdefault(f"{prec}|{split}|{beam}|{n}", []).append(time.perf_counter() - t0)
                bleu[f"{prec}|{split}|{beam}|{n}"] = score([x.text for x in out], [ref], t.tgt_lang).bleu
    rows = []
    for key, times in seconds.items():
        prec, split, beam, n = key.split("|")
        sents = len(sets[split][0])
        rows.append({"precision": prec, "split": split, "beam": int(beam), "batch_sentences": int(n),
                     "sentences": sents, "bleu": bleu[key], "seconds": times,
                     "sents_per_s": sents / statistics.median(times)})
    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(),
              "command": sys.argv, "model": str(args.model), "cpu": cpu_info(), "threads": torch.get_num_threads(),
              "rounds": args.rounds, "rows": rows}
    base = {(r["split"], r["beam"], r["batch_sentences"]): r for r in rows if r["precision"] == args.precisions[0]}
    for r in rows:
        b = base[(r["split"], r["beam"], r["batch_sentences"])]
        r["speed_vs_first"], r["bleu_vs_first"] = r["sents_per_s"] / b["sents_per_s"], r["bleu"] - b["bleu"]
        print(f"{r['precision']:<12} {r['split']:<5} beam {r['beam']} batch {r['batch_sentences']:>5}: BLEU {r['bleu']:.2f} "
              f"({r['bleu_vs_first']:+.2f}), {r['sents_per_s']:,.1f} sents/s ({r['speed_vs_first']:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
