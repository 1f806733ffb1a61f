"""Where a decoding pass spends its time: ``torch.profiler`` over one warm pass of a trained model, written as a
record (the top ops by self CPU time, their share, calls, and the matmuls' share), so profiles are data a later
session can compare. ``matmul_share`` is the share of op time in matrix products (fp32 and int8); with every other
op free the pass would run at ``bound_sents_per_s`` (its unprofiled sentences/s over that share): a peer doing the
same multiplications cannot be outrun by more than that over its own sentences/s. ``matmul_gflops`` is the rate of
the fp32 matrix products (the profiler's FLOP counts of ``aten::mm``, ``addmm`` and ``bmm`` over their time), beside
``peak_gflops``, this CPU's 2,048² sgemm (scripts/bench/benchmark.py): near the peak, only fewer or cheaper (int8)
multiplications go faster.

    python scripts/bench/profile_decoding.py RUN --beam 5 --json docs/results/profile_beam5_local_p.json
    python scripts/bench/profile_decoding.py RUN --beam 5 --precision int8 --batch-sentences 16

Sentences: the run's dev split (``--split``), or the first ``--limit`` of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.data.corpus import load_corpus
from nmt.device import PRECISIONS, set_threads
from nmt.search import STOPS
from nmt.translator import Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.benchmark import decode_batch, matmul_peak_gflops  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

# matrix products, fp32 and int8 (the oneDNN LSTM layer: its gate matmuls; torch.ops.quantized: nmt/int8.py)
MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation",
           "aten::mkldnn_rnn_layer", "aten::mkldnn_rnn_layer_backward", "quantized::linear_dynamic")


def top_ops(prof, rows: int) -> list[dict]:
    """The ``rows`` ops with the most self CPU time: name, milliseconds, share of the pass, calls."""
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"op": e.key, "self_ms": e.self_cpu_time_total / 1000, "share": e.self_cpu_time_total / total, "calls": e.count}
            for e in events[:rows]]


def matmul_ms(prof) -> float:
    """Milliseconds of self CPU time in ``MATMULS``."""
    return sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMULS) / 1000


def matmul_gflops(prof) -> float:
    """GFLOP/s of the fp32 matrix products the profiler counts FLOPs of (``with_flops=True``); 0 without any."""
    events = [e for e in prof.key_averages() if e.key in MATMULS and e.flops]
    ms = sum(e.self_cpu_time_total for e in events) / 1000
    return sum(e.flops for e in events) / ms / 1e6 if ms else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory or checkpoint")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--stop", choices=STOPS, default="full", help="when a beam ends (nmt.search.STOPS; the peers': first)")
    p.add_argument("--batch-sentences", type=int, default=1000)
    p.add_argument("--decode-batch", help="instead: the side-by-side's batches, default, tokens:N or sents:N "
                                          "(scripts/bench/benchmark.py --decode-batch)")
    p.add_argument("--split", default="dev")
    p.add_argument("--limit", type=int, default=0, help="profile only the first N sentences (0: all)")
    p.add_argument("--rows", type=int, default=20, help="ops in the record (default 20)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    set_threads(args.threads)
    t = Translator.load(args.model, "cpu", args.precision)
    src = list(load_corpus(t.config.data, need=(args.split,), splits=(args.split,))[args.split]["src"])
    src = src[: args.limit] if args.limit else src
    batch = decode_batch(args.decode_batch, args.beam) if args.decode_batch else {"batch_sentences": args.batch_sentences}
    search = dict(beam=args.beam, stop=args.stop, **batch)
    t.translate(src[:64], **search)  # warm-up
    start = time.perf_counter()
    t.translate(src, **search)  # unprofiled: the pass's wall time, against its op time below
    wall_ms = (time.perf_counter() - start) * 1000
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        t.translate(src, **search)
    ops = top_ops(prof, args.rows)
    total_ms = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1000
    share = matmul_ms(prof) / total_ms
    sents_per_s, bound = len(src) / wall_ms * 1000, len(src) / (wall_ms * share) * 1000
    gflops, peak = matmul_gflops(prof), matmul_peak_gflops()
    for o in ops:
        print(f"{o['op']:<36} {o['self_ms']:9.1f} ms  {o['share']:6.1%}  {o['calls']:>7} calls")
    print(f"{'all ops':<36} {total_ms:9.1f} ms for {len(src)} sentences; unprofiled wall time {wall_ms:.1f} ms "
          f"({sents_per_s:,.0f} sentences/s); matmuls {share:.1%}: every other op free would give {bound:,.0f} sentences/s; "
          f"fp32 matmuls at {gflops:,.0f} GFLOP/s, this CPU's sgemm peak {peak:,.0f}")
    save(args.json, record({"threads": torch.get_num_threads(), "model": str(args.model), "beam": args.beam,
                            "stop": args.stop, "wall_ms": wall_ms, "precision": args.precision,
                            "batch_sentences": args.batch_sentences, "decode_batch": args.decode_batch,
                            "sentences": len(src), "total_ms": total_ms, "sents_per_s": sents_per_s, "matmul_share": share,
                            "bound_sents_per_s": bound, "matmul_gflops": gflops, "peak_gflops": peak, "ops": ops}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
