"""The search's output layer in blocks (``nmt.search.chunk_rows``) against one block of every row, side by side in
one process, written as a record: sentences/s (medians of alternating rounds and of their paired ratios), the
same translations, and each way's peak memory (a fresh process each).

    python scripts/bench/benchmark_output_chunks.py RUN --decode-batch tokens:8000 --json docs/results/output_chunks.json

On the CPU a step's (rows, vocab) logits are cut into blocks of ``nmt.search.CHUNK`` elements: W_s, the log-softmax
and the choice of tokens run block by block, so the blocks stay in cache and no step allocates (rows, vocab) tensors.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import nmt.search
from nmt.data.corpus import load_corpus
from nmt.device import cpu_info, keep_freed_memory, set_threads
from nmt.run_folder import git_commit
from nmt.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling script below
from benchmark import decode_batch  # noqa: E402

BLOCKED = nmt.search.chunk_rows


def one_block(device: torch.device, vocab: int) -> int:
    return 1 << 62


def setting(way: str) -> None:
    nmt.search.chunk_rows = BLOCKED if way == "blocks" else one_block


def load(model: str, precision: str, split: str) -> tuple[Translator, list[str]]:
    t = Translator.load(model, "cpu", precision)
    return t, list(load_corpus(t.config.data, need=(split,), splits=(split,))[split]["src"])


def peak_mb(args: argparse.Namespace, precision: str, beam: int, way: str) -> float:
    """Peak RSS of a fresh process that loads the model and translates the split once, ``way``."""
    proc = subprocess.run([sys.executable, __file__, args.model, "--peak-only", way, "--precisions", precision,
                           "--beams", str(beam), "--decode-batch", args.decode_batch, "--split", args.split],
                          capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory or checkpoint")
    p.add_argument("--precisions", default="fp32,int8")
    p.add_argument("--beams", default="1,5")
    p.add_argument("--stop", default="first", help="beam search's stop rule (nmt.search.STOPS)")
    p.add_argument("--decode-batch", default="default", help="default, tokens:N or sents:N (scripts/bench/benchmark.py)")
    p.add_argument("--split", default="dev")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--peak-only", choices=("blocks", "one"), help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    keep_freed_memory()
    set_threads(0)
    beams = [int(b) for b in args.beams.split(",")]
    if args.peak_only:
        setting(args.peak_only)
        t, src = load(args.model, args.precisions, args.split)
        t.translate(src, beam=beams[0], stop=args.stop, **decode_batch(args.decode_batch, beams[0]))
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return 0
    rows = []
    for precision in args.precisions.split(","):
        t, src = load(args.model, precision, args.split)
        for beam in beams:
            kw = dict(beam=beam, stop=args.stop, **decode_batch(args.decode_batch, beam))
            t.translate(src[:100], **kw)  # warm-up
            seconds: dict[str, list[float]] = {"one": [], "blocks": []}
            texts: dict[str, list[str]] = {}
            for r in range(args.rounds):
                for way in ("one", "blocks") if r % 2 == 0 else ("blocks", "one"):
                    setting(way)
                    start = time.perf_counter()
                    out = t.translate(src, **kw)
                    seconds[way].append(time.perf_counter() - start)
                    texts[way] = [o.text for o in out]
            setting("blocks")
            ratios = [a / b for a, b in zip(seconds["one"], seconds["blocks"])]
            row = {"precision": precision, "beam": beam, "sentences": len(src),
                   "sents_per_s": {w: len(src) / statistics.median(s) for w, s in seconds.items()},
                   "paired_ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
                   "same_translations": texts["one"] == texts["blocks"],
                   "peak_mb": {w: peak_mb(args, precision, beam, w) for w in ("one", "blocks")}}
            rows.append(row)
            print(f"{precision} beam {beam}: one block {row['sents_per_s']['one']:,.0f}, blocks "
                  f"{row['sents_per_s']['blocks']:,.0f} sentences/s; paired ratio {row['paired_ratio']:.3f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f}); peak {row['peak_mb']['one']:,.0f} -> "
                  f"{row['peak_mb']['blocks']:,.0f} MB; same translations: {row['same_translations']}", flush=True)
    if args.json:
        record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(),
                  "command": sys.argv, "cpu": cpu_info(), "threads": torch.get_num_threads(), "model": args.model,
                  "decode_batch": args.decode_batch, "stop": args.stop, "chunk_elements": nmt.search.CHUNK,
                  "rounds": args.rounds, "rows": rows}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
