"""Our bench-small against Joey NMT and OpenNMT-py, in one sitting, interleaved, with ratios.

    python scripts/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --out outputs/side_by_side
    python scripts/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --smoke      # ~15 minutes
    python scripts/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --peers onmt --decode-precision fp32,bf16

Each round: our 15-minute budget run (``nmt.train +experiment=bench_small``), then for each peer
our throughput and decoding benchmark (``scripts/benchmark.py``, decoding the budget run's model)
immediately followed by that peer's harness (``../shared/bench/peers/run.sh run_<peer>.sh``:
throughput runs, its own 15-minute budget run, decoding). Machines drift, so ratios are taken
between neighbouring runs; the table gives medians over rounds. Writes OUT/side_by_side.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = {"joey": "Joey NMT", "onmt": "OpenNMT-py"}
SMOKE_ENV = {"BENCH_BUDGET_S": "60", "BENCH_TPUT_REPEATS": "1", "BENCH_TPUT_STEPS": "50", "BENCH_DECODE_REPEATS": "1"}


def run(cmd: list[str], env: dict | None = None, log: Path | None = None) -> None:
    print(f"$ {' '.join(cmd)}", flush=True)
    with open(log, "w") if log else open(os.devnull, "w") as out:
        proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}" + (f"; see {log}" if log else ""))


def ours_budget(args, folder: Path) -> dict:
    """Train for the budget, then score the best checkpoint on the dev split (the peers' test set)."""
    run_dir = folder / "ours_budget"
    run([sys.executable, "-m", "nmt.train", "+experiment=bench_small", "data=files", f"data.dir={args.data}",
         f"trainer.max_minutes={args.budget_minutes}", "trainer.test_beam=0", f"hydra.run.dir={run_dir}"],
        log=folder / "ours_budget.log")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {"steps": metrics["steps"], "peak_rss_mb": metrics["peak_memory_mb"], "run_dir": str(run_dir)}


def ours_bench(args, folder: Path, checkpoint: str, tag: str) -> dict:
    out = folder / f"ours_{tag}.json"
    steps = ["--steps", "50", "--warmup", "10"] if args.smoke else []
    run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--config", "bench_small", "--data", str(args.data),
         "--checkpoint", checkpoint, "--json", str(out), "--decode-precision", args.decode_precision, *steps],
        log=folder / f"ours_{tag}.log")
    return json.loads(out.read_text())


def peer_bench(args, folder: Path, peer: str) -> dict:
    bench_out = Path(args.peer_out).expanduser()
    env = {"BENCH_OUT": str(bench_out), "BENCH_SHARED_DATA": str(Path(args.data).resolve().parent)}
    if args.smoke:
        env.update(SMOKE_ENV)
    run(["bash", str(Path(args.peers_dir) / "run.sh"), f"run_{peer}.sh"], env=env, log=folder / f"{peer}.log")
    result = json.loads((bench_out / "results" / f"{peer}.json").read_text())
    (folder / f"{peer}.json").write_text(json.dumps(result, indent=1))
    return result


def extra_precisions(args) -> list[str]:
    """Our decoding precisions besides fp32 (their figures get a suffix, _bf16, and face the peers' fp32)."""
    return [p for p in args.decode_precision.split(",") if p != "fp32"]


def decode_figures(greedy: dict, beam5: dict, first: dict, suffix: str = "") -> dict:
    """BLEU and sentences/s of the three decodes (greedy, beam 5, beam 5 ending at the first finished), keys + ``suffix``."""
    return {f"bleu_greedy{suffix}": greedy["bleu"], f"bleu_beam5{suffix}": beam5["bleu"],
            f"decode_greedy_sents_per_s{suffix}": greedy["sents_per_s"],
            f"decode_beam5_sents_per_s{suffix}": beam5["sents_per_s"],
            f"bleu_beam5_first{suffix}": first["bleu"], f"decode_beam5_first_sents_per_s{suffix}": first["sents_per_s"]}


def figures_ours(bench: dict, budget: dict, extra: list[str]) -> dict:
    d = bench["decode"]
    out = {"train_tgt_tok_per_s": bench["train"]["tgt_tok_per_s"], "peak_rss_mb": bench["train"]["peak_rss_mb"],
           "budget_steps": budget["steps"]}
    for s in ["", *(f"_{p}" for p in extra)]:
        out.update(decode_figures(d["greedy" + s], d["beam5" + s], d["beam5_first" + s], s))
    return out


def figures_peer(r: dict, extra: list[str]) -> dict:
    t = r["test"]
    out = {"train_tgt_tok_per_s": r["throughput"]["tgt_tok_per_s"], "peak_rss_mb": r["throughput"]["peak_rss_mb"],
           "budget_steps": r["budget"].get("steps_at_eval_checkpoint") or r["budget"].get("last_logged_step")}
    # the peers end a sentence's beam when its best candidate ends (our stop=first), and decode in fp32 only
    for s in ["", *(f"_{p}" for p in extra)]:
        out.update(decode_figures(t["greedy"], t["beam5"], t["beam5"], s))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="the Tatoeba copy (train/dev.{zh,en})")
    p.add_argument("--peers", nargs="+", default=list(PEERS), choices=list(PEERS))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--budget-minutes", type=float, default=15.0)
    p.add_argument("--smoke", action="store_true", help="1-minute budgets and short throughput runs, to try the pipeline")
    p.add_argument("--peers-dir", default=str(ROOT.parent / "shared" / "bench" / "peers"))
    p.add_argument("--peer-out", default="~/.cache/nmt-peers/bench")
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "side_by_side")
    p.add_argument("--decode-precision", default="fp32",
                   help="our decoding precisions, comma-separated (scripts/benchmark.py's flag), e.g. fp32,bf16,bf16_output "
                        "on a CPU with AMX/avx512_bf16: rows *_bf16 put ours in bf16 beside the peers' fp32")
    args = p.parse_args()
    if not (Path(args.peers_dir) / "run.sh").is_file():  # before the budget run, not 20 minutes into the sitting
        p.error(f"--peers-dir {args.peers_dir}: no run.sh there (the peer harness, ../shared/bench/peers)")
    if args.smoke:
        args.budget_minutes = 1.0
    rows: dict[str, list[dict]] = {"ours": [], **{peer: [] for peer in args.peers}}
    ratios: dict[str, list[dict]] = {peer: [] for peer in args.peers}
    t0 = time.perf_counter()
    for r in range(1, args.rounds + 1):
        folder = args.out / f"round{r}"
        folder.mkdir(parents=True, exist_ok=True)
        budget = ours_budget(args, folder)
        for peer in args.peers:
            # the final weights, as the peers score theirs: best.pt is chosen on the dev split, the peers' test set
            last = str(Path(budget["run_dir"]) / "checkpoints" / "last.pt")
            ours = figures_ours(ours_bench(args, folder, last, peer), budget, extra_precisions(args))
            theirs = figures_peer(peer_bench(args, folder, peer), extra_precisions(args))
            rows["ours"].append(ours)
            rows[peer].append(theirs)
            ratios[peer].append({k: ours[k] / theirs[k] if theirs[k] else float("nan") for k in ours})
            print(json.dumps({"round": r, "peer": peer, "ours": ours, "theirs": theirs}), flush=True)
    med = {name: {k: statistics.median(x[k] for x in xs) for k in xs[0]} for name, xs in rows.items() if xs}
    med_ratio = {peer: {k: statistics.median(x[k] for x in xs) for k in xs[0]} for peer, xs in ratios.items()}
    keys = list(med["ours"])
    head = ["figure (median)", "nmt", *[PEERS[p] for p in args.peers], *[f"nmt / {PEERS[p]}" for p in args.peers]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in keys:
        cells = [f"{med[n][k]:,.2f}" if "bleu" in k else f"{med[n][k]:,.0f}" for n in ("ours", *args.peers)]
        lines.append(f"| {k} | " + " | ".join(cells + [f"{med_ratio[p][k]:.2f}×" for p in args.peers]) + " |")
    table = "\n".join(lines)
    note = (f"\n{args.rounds} round(s), budget {args.budget_minutes:g} min{' (smoke settings)' if args.smoke else ''}, "
            f"{(time.perf_counter() - t0) / 60:.0f} min in all.\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "side_by_side.md").write_text(table + "\n" + note)
    (args.out / "side_by_side.json").write_text(json.dumps({"rows": rows, "median": med, "ratios": med_ratio}, indent=1))
    print("\n" + table + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
