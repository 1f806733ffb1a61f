"""Train every attention variant under the same budget and tabulate quality and cost.

    python scripts/compare_attention.py --data ../shared/data/tatoeba-cmn-eng --minutes 2 --out outputs/compare

Variants: {dot, general, concat, scaled_dot} × {global, local_m, local_p}, the paper's
``location`` baseline, and multi-head (4 heads, scaled dot-product) global and local-p. Each trains
``python -m nmt.train`` for ``--minutes`` with the same model and data, then its best
checkpoint decodes the dev split (beam 5, timed). Writes ``OUT/attention.md`` and ``.csv``:
dev BLEU, chrF, perplexity, parameters, training target tokens/s, decode sentences/s, wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = [(s, m, 1) for s in ("dot", "general", "concat", "scaled_dot") for m in ("global", "local_m", "local_p")]
VARIANTS += [("location", "global", 1), ("scaled_dot", "global", 4), ("scaled_dot", "local_p", 4)]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return proc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="folder with train/dev.{zh,en}")
    p.add_argument("--minutes", type=float, default=2.0, help="training budget per variant")
    p.add_argument("--out", type=Path, default=Path("outputs/compare"))
    p.add_argument("--only", nargs="*", default=[], help="variant names to run (default: all)")
    p.add_argument("overrides", nargs="*", help="extra training overrides for every variant, key=value")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for score, mode, heads in VARIANTS:
        name = f"{score}-{mode}" + (f"-{heads}heads" if heads > 1 else "")
        if args.only and name not in args.only:
            continue
        run_dir = args.out / name
        t0 = time.perf_counter()
        run([sys.executable, "-m", "nmt.train", "+experiment=zh_en_global", "data=files", f"data.dir={args.data}",
             f"model.attention.score={score}", f"model.attention.mode={mode}", f"model.attention.heads={heads}",
             f"trainer.max_minutes={args.minutes}", "trainer.test_beam=0", "trainer.attention_images=0",
             "trainer.valid_every=100000", f"hydra.run.dir={run_dir}", *args.overrides])
        wall = time.perf_counter() - t0
        metrics = json.loads((run_dir / "metrics.json").read_text())
        t0 = time.perf_counter()
        ev = run([sys.executable, "-m", "nmt.evaluate", str(run_dir), "--split", "dev", "--beam", "5", "--json"])
        decode = time.perf_counter() - t0
        scores = json.loads(ev.stdout)
        last = metrics["history"][-1]
        rows.append({
            "variant": name, "dev_bleu": round(scores["bleu"], 2), "dev_chrf": round(scores["chrf"], 2),
            "dev_ppl": round(last["valid_ppl"], 2), "parameters": metrics["parameters"], "steps": metrics["steps"],
            "train_tgt_tok_per_s": round(metrics["train_tgt_tok_per_s"]),
            # end to end: process start and model loading included
            "decode_sents_per_s": round(scores["sentences"] / decode, 1), "wall_s": round(wall),
        })
        print(json.dumps(rows[-1]), flush=True)
    if not rows:
        sys.exit("no variant ran (check --only)")
    with open(args.out / "attention.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    head = ["variant", "dev BLEU", "chrF", "dev ppl", "params", "steps", "train tgt tok/s", "decode sent/s", "wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows]
    (args.out / "attention.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
