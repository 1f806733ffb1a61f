"""Training step time of global vs local attention as the source grows.

    python scripts/benchmark_local.py --lengths 20 50 100 200 --json local.json

Synthetic batches (random ids, source and target of the same length, 32 sentences) through the
bench-small model (general score, input feeding); local modes gather the 2D + 1 window once
the source is long enough (nmt/attention.py), so their step cost grows with D, not S.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.config import ModelConfig
from nmt.device import set_threads
from nmt.model import build_model
from nmt.train import batch_loss


def step_time(mode: str, length: int, batch: int, steps: int, window: int, score: str) -> float:
    torch.manual_seed(0)
    cfg = OmegaConf.structured(ModelConfig())
    cfg.attention.mode, cfg.attention.score, cfg.attention.window = mode, score, window
    model = build_model(cfg, 4000, 4000)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    rng = random.Random(0)
    src = [[rng.randrange(4, 4000) for _ in range(length)] for _ in range(batch)]
    tgt = [[rng.randrange(4, 4000) for _ in range(length)] for _ in range(batch)]
    b = make_batch(src, tgt, range(batch))
    times = []
    for i in range(steps + 2):
        t0 = time.perf_counter()
        loss = batch_loss(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= 2:  # warm-up
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[20, 50, 100, 200])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--score", default="general")
    p.add_argument("--json")
    args = p.parse_args()
    set_threads(0)
    rows = []
    print(f"{'src len':>8} {'global s/step':>14} {'local_m':>10} {'local_p':>10} {'local_p / global':>17}")
    for n in args.lengths:
        t = {m: step_time(m, n, args.batch, args.steps, args.window, args.score) for m in ("global", "local_m", "local_p")}
        rows.append({"length": n, **{f"{m}_s_per_step": v for m, v in t.items()}})
        print(f"{n:>8} {t['global']:>14.3f} {t['local_m']:>10.3f} {t['local_p']:>10.3f} {t['local_p'] / t['global']:>17.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
