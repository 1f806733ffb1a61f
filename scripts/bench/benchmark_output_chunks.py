"""The search's output layer in blocks (``nmt.search.chunk_rows``) against one block of every row, side by side in
one process, written as a record: sentences/s (medians of alternating rounds and of their paired ratios), the
same translations, and each way's peak memory (a fresh process each).

    python scripts/bench/benchmark_output_chunks.py RUN --decode-batch tokens:8000 --json docs/results/output_chunks.json

On the CPU a step's (rows, vocab) logits are cut into blocks of ``nmt.search.CHUNK`` elements: W_s, the log-softmax
and the choice of tokens run block by block, so the blocks stay in cache and no step allocates (rows, vocab) tensors.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

import nmt.search
from nmt.data.corpus import load_corpus
from nmt.device import keep_freed_memory, set_threads
from nmt.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.benchmark import decode_batch  # noqa: E402
from scripts.bench.timing import alternate, child_json  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

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
    return child_json([sys.executable, __file__, args.model, "--peak-only", way, "--precisions", precision, "--beams",
                       str(beam), "--decode-batch", args.decode_batch, "--split", args.split], f"{way}'s peak")


def compare(t: Translator, src: list[str], kw: dict, rounds: int) -> dict:
    """One block against blocks, alternating ``rounds`` times after a warm-up: medians, paired ratios, same texts."""
    t.translate(src[:100], **kw)  # warm-up
    texts: dict[str, list[str]] = {}

    def timed(way: str) -> float:
        setting(way)
        start = time.perf_counter()
        texts[way] = [o.text for o in t.translate(src, **kw)]
        return time.perf_counter() - start

    seconds = alternate(["one", "blocks"], rounds, timed)
    setting("blocks")
    ratios = [a / b for a, b in zip(seconds["one"], seconds["blocks"])]
    return {"beam": kw["beam"], "sentences": len(src), "sents_per_s": {w: len(src) / statistics.median(s)
                                                                        for w, s in seconds.items()},
            "paired_ratio": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
            "same_translations": texts["one"] == texts["blocks"]}


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
            rows.append(row := compare(t, src, dict(beam=beam, stop=args.stop, **decode_batch(args.decode_batch, beam)),
                                       args.rounds))
            row.update(precision=precision, peak_mb={w: peak_mb(args, precision, beam, w) for w in ("one", "blocks")})
            print(f"{precision} beam {beam}: one block {row['sents_per_s']['one']:,.0f}, blocks "
                  f"{row['sents_per_s']['blocks']:,.0f} sentences/s; paired ratio {row['paired_ratio']:.3f} "
                  f"({row['ratio_range'][0]:.2f}-{row['ratio_range'][1]:.2f}); peak {row['peak_mb']['one']:,.0f} -> "
                  f"{row['peak_mb']['blocks']:,.0f} MB; same translations: {row['same_translations']}", flush=True)
    save(args.json, record({"threads": torch.get_num_threads(), "model": args.model, "decode_batch": args.decode_batch,
                            "stop": args.stop, "chunk_elements": nmt.search.CHUNK, "rounds": args.rounds, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
