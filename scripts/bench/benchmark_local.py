"""Training step time of global vs local attention as the source grows.

    python scripts/bench/benchmark_local.py --lengths 20 50 100 200 --json local.json

Synthetic batches (random ids, source and target of the same length, 32 sentences) through the
bench-small model (general score, input feeding), every variant stepped in turn so that machine
drift hits all alike; medians. ``local_p`` masks the whole source; ``local_p gathered`` forces
the O(D) path that gathers the 2D + 1 window (nmt/attention.py decides by length which to use).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from nmt.batching import make_batch
from nmt.build import build_model
from nmt.config import ModelConfig
from nmt.device import set_threads
from nmt.update import batch_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.bench.timing import alternate  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

VARIANTS = {"global": ("global", False), "local_m": ("local_m", False), "local_p": ("local_p", False),
            "local_p gathered": ("local_p", True)}


def stepper(mode: str, gathered: bool, length: int, batch: int, window: int, score: str, hidden: int):
    """One training step of the bench-small model on a fixed synthetic batch, as a timed callable."""
    torch.manual_seed(0)
    cfg = OmegaConf.structured(ModelConfig(emb_size=hidden, hidden_size=hidden))
    cfg.attention.mode, cfg.attention.score, cfg.attention.window = mode, score, window
    model = build_model(cfg, 4000, 4000, gather_above=0.0 if gathered else math.inf)  # force one path
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    rng = random.Random(0)
    src = [[rng.randrange(4, 4000) for _ in range(length)] for _ in range(batch)]
    tgt = [[rng.randrange(4, 4000) for _ in range(length)] for _ in range(batch)]
    b = make_batch(src, tgt, range(batch))

    def step() -> float:
        t0 = time.perf_counter()
        loss = batch_loss(model, b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[20, 50, 100, 200])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=7, help="measured steps per variant (after 2 warm-up steps)")
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--score", default="general")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--json")
    args = p.parse_args()
    set_threads(0)
    rows = []
    print(f"{'src len':>8} " + " ".join(f"{v:>17}" for v in VARIANTS) + f" {'local_p / global':>17}")
    for n in args.lengths:
        steps = {name: stepper(mode, g, n, args.batch, args.window, args.score, args.hidden)
                 for name, (mode, g) in VARIANTS.items()}
        times = alternate(list(steps), args.steps, lambda name, steps=steps: steps[name](), warmup=2)  # drift hits all alike
        med = {name: statistics.median(v) for name, v in times.items()}
        rows.append({"length": n, **{f"{k.replace(' ', '_')}_s_per_step": v for k, v in med.items()}})
        print(f"{n:>8} " + " ".join(f"{v:>17.3f}" for v in med.values()) + f" {med['local_p'] / med['global']:>17.2f}",
              flush=True)
    save(args.json, record({"batch": args.batch, "window": args.window, "score": args.score, "hidden": args.hidden,
                            "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
