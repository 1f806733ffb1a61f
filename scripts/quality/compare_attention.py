"""Rank Luong's attention variants: the same recipe, data and minutes for each, two seeds where it matters.

    python scripts/quality/compare_attention.py --minutes 8 --out outputs/compare

Phase 1 trains the nine score × mode variants ({dot, general, concat} × {global, local-m,
local-p}), the paper's ``location`` score and 4-head scaled dot-product (global), one seed each,
in an interleaved order so that a drift of the machine's speed does not fall on one score or one
mode. Phase 2 trains a second seed of the top three and of the bottom one by dev BLEU, so that the
table shows the spread between seeds beside the spread between variants. Every run trains
``+experiment=zh_en_global`` (the short-budget recipe on the packaged Tatoeba corpus) with only the
attention changed, then ``nmt.evaluate`` decodes dev and test with beam 5.

Each finished run appends a row to ``OUT/runs.jsonl`` and rewrites ``OUT/attention.md`` and
``OUT/attention.csv``; run the same command again to resume a half-finished table (finished runs
are kept, a half-trained one starts again). Last, the general-score model of each mode translates
one dev sentence with its attention plotted (``OUT/images/{global,local_m,local_p}.png``).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.records.record import cpu  # noqa: E402

SEEDS = (42, 43)

# (score, mode, heads) in the order phase 1 runs them: each score and each mode spread over the run.
VARIANTS = [
    ("dot", "global", 1), ("general", "local_m", 1), ("concat", "local_p", 1), ("location", "global", 1),
    ("general", "global", 1), ("concat", "local_m", 1), ("dot", "local_p", 1), ("scaled_dot", "global", 4),
    ("concat", "global", 1), ("dot", "local_m", 1), ("general", "local_p", 1),
]

# One of the three dev sentences with 24 or more characters (the mean is 9.7): long enough that a
# local window of D = 10 pieces each side does not cover the whole source.
IMAGE_SENTENCE = "相比二十年前的日本，现在的日本有了翻天覆地的变化。"

# Luong et al. (2015), Table 4: WMT'14 En→De, BLEU before unknown-word replacement.
# concat is not in the table: the paper found it poor (its concat fixed part of W_a to the identity).
PAPER = {"location-global": "18.1", "dot-global": "18.6", "general-global": "17.3", "general-local_m": "18.6",
         "dot-local_p": "18.0", "general-local_p": "19.0"}


def name_of(score: str, mode: str, heads: int) -> str:
    return f"{score}-{mode}" + (f"-{heads}heads" if heads > 1 else "")


BY_NAME = {name_of(*v): v for v in VARIANTS}


def second_seed_names(rows: list[dict]) -> list[str]:
    """The top three and the bottom one by first-seed dev BLEU, top first then bottom second."""
    first = sorted((r for r in rows if r["seed"] == SEEDS[0]), key=lambda r: -r["dev_bleu"])
    if len(first) < 4:
        return []
    picked = [r["variant"] for r in first[:3]]
    return [picked[0], first[-1]["variant"], *picked[1:]]


def plan(rows: list[dict]) -> list[tuple[str, int]]:
    """(variant, seed) still to run: phase 1 in order, then phase 2 once phase 1 is complete."""
    done = {(r["variant"], r["seed"]) for r in rows}
    todo = [(name_of(*v), SEEDS[0]) for v in VARIANTS if (name_of(*v), SEEDS[0]) not in done]
    if todo:
        return todo
    return [(n, SEEDS[1]) for n in second_seed_names(rows) if (n, SEEDS[1]) not in done]


def run(cmd: list[str], log: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"compare_attention: failed (log in {log}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return proc


def train_and_score(name: str, seed: int, minutes: float, out: Path, overrides: list[str]) -> dict:
    """Train one variant (unless a finished run is there) and decode dev and test with beam 5."""
    score, mode, heads = BY_NAME[name]
    run_dir = out / "runs" / f"{name}-seed{seed}"
    if not (run_dir / "metrics.json").exists():  # not trained, or stopped half-way: start again
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run([sys.executable, "-m", "nmt.train", "+experiment=zh_en_global", f"model/attention={mode}",
             f"model.attention.score={score}", f"model.attention.heads={heads}", f"trainer.seed={seed}",
             f"trainer.max_minutes={minutes}", "trainer.test_beam=0", "trainer.attention_images=0",
             "trainer.valid_every=1000000", f"hydra.run.dir={run_dir}", *overrides], out / "logs" / f"{run_dir.name}.train.log")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    ev = run([sys.executable, "-m", "nmt.evaluate", str(run_dir), "--split", "dev", "--split", "test",
              "--beam", "5", "--json"], out / "logs" / f"{run_dir.name}.evaluate.log")
    dev, test = json.loads(ev.stdout)
    return {
        "variant": name, "seed": seed,
        "dev_bleu": round(dev["bleu"], 2), "test_bleu": round(test["bleu"], 2),
        "dev_chrf": round(dev["chrf"], 2), "test_chrf": round(test["chrf"], 2),
        "dev_ppl": round(metrics["history"][-1]["valid_ppl"], 2), "parameters": metrics["parameters"],
        "updates": metrics["steps"], "train_tgt_tok_per_s": round(metrics["train_tgt_tok_per_s"]),
        "decode_sents_per_s": dev["sentences_per_s"],  # dev, beam 5, decoding alone
        "train_seconds": round(metrics["train_seconds"]), "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _mean(rows: list[dict], key: str, digits: int = 2) -> float:
    return round(statistics.fmean(r[key] for r in rows), digits)


def _spread(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows]
    return f"{max(vals) - min(vals):.2f}" if len(vals) > 1 else "–"


def _seeds(rows: list[dict], key: str) -> str:
    """The mean, and each seed's value in brackets where there are several."""
    each = f" ({' / '.join(f'{r[key]:.2f}' for r in rows)})" if len(rows) > 1 else ""
    return f"{_mean(rows, key):.2f}{each}"


def table(rows: list[dict], paper: dict[str, str] = PAPER) -> list[str]:
    """One line per variant, best mean dev BLEU first; two-seed variants show both seeds and the spread; ``paper``:
    Table 4's BLEU by variant."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["variant"], []).append(r)
    head = ["variant", "dev BLEU", "test BLEU", "seed spread dev / test", "dev chrF", "test chrF", "dev ppl",
            "params", "updates", "train tgt tok/s", "decode sent/s", "paper (Table 4)"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 2) + " --- |"]
    for name, rs in sorted(groups.items(), key=lambda kv: -_mean(kv[1], "dev_bleu")):
        rs = sorted(rs, key=lambda r: r["seed"])
        spread = f"{_spread(rs, 'dev_bleu')} / {_spread(rs, 'test_bleu')}" if len(rs) > 1 else "one seed"
        lines.append("| " + " | ".join([
            f"`{name}`", _seeds(rs, "dev_bleu"), _seeds(rs, "test_bleu"), spread, f"{_mean(rs, 'dev_chrf'):.2f}",
            f"{_mean(rs, 'test_chrf'):.2f}", f"{_mean(rs, 'dev_ppl'):.2f}", f"{rs[0]['parameters']:,}",
            f"{round(_mean(rs, 'updates', 0)):,}", f"{round(_mean(rs, 'train_tgt_tok_per_s', 0)):,}",
            f"{_mean(rs, 'decode_sents_per_s', 1):,.1f}", paper.get(name, "–"),
        ]) + " |")
    return lines


def cpu_line() -> str:
    info = cpu()
    return f"{info['model']}, {info['cores']} cores; {' '.join(info['flags']) or 'no AMX or AVX-512'}"


def write_outputs(rows: list[dict], out: Path, header: str) -> None:
    with open(out / "attention.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "attention.md").write_text(header + "\n\n" + "\n".join(table(rows)) + "\n")


def attention_images(out: Path) -> None:
    sentence = IMAGE_SENTENCE
    (out / "images").mkdir(exist_ok=True)
    for mode in ("global", "local_m", "local_p"):
        run_dir = out / "runs" / f"general-{mode}-seed{SEEDS[0]}"
        with tempfile.TemporaryDirectory() as tmp:
            proc = run([sys.executable, "-m", "nmt.translate", str(run_dir), "--beam", "5", "--plot-attention", tmp,
                        sentence], out / "logs" / f"image-{mode}.log")
            shutil.copy(next(Path(tmp).glob("*.png")), out / "images" / f"{mode}.png")
        print(f"{mode}: {sentence} → {proc.stdout.strip()}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=8.0, help="training budget per run (default 8)")
    p.add_argument("--out", type=Path, default=Path("outputs/compare"))
    p.add_argument("overrides", nargs="*", help="extra training overrides for every run, key=value")
    args = p.parse_args()
    out = args.out.resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    rows_file = out / "runs.jsonl"
    t0 = time.perf_counter()
    header = (f"`python scripts/quality/compare_attention.py --minutes {args.minutes:g}"
              + "".join(f" {o}" for o in args.overrides) + f"` on {cpu_line()}")
    while todo := plan(rows := read_rows(rows_file)):
        name, seed = todo[0]
        print(f"[{time.strftime('%H:%M:%S')}] {name} seed {seed} ({len(todo)} left in this phase)", flush=True)
        row = train_and_score(name, seed, args.minutes, out, args.overrides)
        with open(rows_file, "a") as f:
            f.write(json.dumps(row) + "\n")
        write_outputs(read_rows(rows_file), out, header)
        print(json.dumps(row), flush=True)
    attention_images(out)
    rows = read_rows(rows_file)
    write_outputs(rows, out, header)
    print((out / "attention.md").read_text())
    print(f"{len(rows)} runs; this invocation took {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
