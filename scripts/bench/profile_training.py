"""Where a training step spends its time: ``torch.profiler`` over warm updates of an experiment, written as a record
(the top ops by self CPU time, their share, calls, and the matmuls' share), so the bound on training speed is data.

    python scripts/bench/profile_training.py --config bench_small --data ../shared/data/tatoeba-cmn-eng \\
        --json docs/results/profile_train_bench_small_fp32.json

The updates are the trainer's (``benchmark.py``'s step: forward, backward, clipping, fused Adam) on the corpus's own
batches, in fp32 unless ``--precision`` says otherwise. First ``--warmup`` updates untimed, then ``--steps`` timed
without the profiler (target tokens/s), then the same number profiled. ``matmul_share`` is the share of op time in
matrix products (mm, addmm, bmm and the like): were every other op free, a step would take that share of its time,
so ``1 / matmul_share`` bounds what removing overheads alone can gain. A peer doing the same matmuls at the same
rate cannot be outrun by more than that bound times its own overhead ratio.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.batching import epoch_batches
from nmt.build import build_model
from nmt.device import set_threads
from nmt.optim import build_optimizer
from nmt.tokenizer import PAD

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.benchmark import compose_config, prepare_corpus, update_step  # noqa: E402
from scripts.bench.profile_decoding import matmul_ms, top_ops  # noqa: E402
from scripts.records.record import record, save  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="bench_small", help="experiment name under configs/experiment/")
    p.add_argument("--data", help="folder with train/dev.{zh,en} (default: the packaged Tatoeba corpus)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "bf16_output"))
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rows", type=int, default=20, help="ops in the record (default 20)")
    p.add_argument("--json", type=Path)
    p.add_argument("overrides", nargs="*", help="extra config overrides, key=value")
    args = p.parse_args()
    cfg = compose_config(args.config, [*args.overrides, f"trainer.precision={args.precision}"], args.data)
    tr = cfg.trainer
    set_threads(tr.threads)
    device = torch.device("cpu")
    torch.manual_seed(tr.seed)
    corpus = prepare_corpus(cfg)
    tok = corpus.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).train()
    step = update_step(model, build_optimizer(tr, model.parameters()), tr, device)
    rng, batches = random.Random(tr.seed), []
    while len(batches) < args.warmup + 2 * args.steps:
        batches += epoch_batches(corpus.train, tr.batch_tokens, rng, tr.batch_sentences or 100_000)

    for b in batches[: args.warmup]:
        step(b)
    timed = batches[args.warmup : args.warmup + args.steps]
    t0 = time.perf_counter()
    for b in timed:
        step(b)
    seconds = time.perf_counter() - t0
    tgt_tokens = sum(int((b.tgt_out != PAD).sum()) - b.size for b in timed)  # without EOS, as the peers' harness
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[args.warmup + args.steps : args.warmup + 2 * args.steps]:
            step(b)
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total_ms = sum(e.self_cpu_time_total for e in events) / 1000
    mm_ms = matmul_ms(prof)
    ops = top_ops(prof, args.rows)
    for o in ops:
        print(f"{o['op']:<36} {o['self_ms']:9.1f} ms  {o['share']:6.1%}  {o['calls']:>7} calls")
    print(f"{args.steps} updates: {tgt_tokens / seconds:,.0f} target tokens/s unprofiled; profiled op time "
          f"{total_ms:,.0f} ms, matmuls {mm_ms / total_ms:.1%}: every other op free would give "
          f"{total_ms / mm_ms:.2f}x")
    save(args.json, record({"threads": torch.get_num_threads(), "config": args.config, "overrides": args.overrides,
                            "precision": args.precision, "steps": args.steps,
                            "mean_batch_sents": sum(b.size for b in timed) / len(timed), "tgt_tok_per_s": tgt_tokens / seconds,
                            "total_ms": total_ms, "matmul_ms": mm_ms, "matmul_share": mm_ms / total_ms, "ops": ops}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
