"""Our bench-small against Eole, OpenNMT-py and Joey NMT, like for like, in one sitting, with ratios.

    python scripts/peers/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --peers eole --json docs/results/side_by_side.json
    python scripts/peers/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --smoke --peers eole      # ~25 minutes
    python scripts/peers/side_by_side.py --data ../shared/data/tatoeba-cmn-eng --peers onmt --decode-precision fp32,int8

Each round: our 15-minute budget run (``nmt.train +experiment=bench_small``), then for each peer and each decoding
batch setting (``--decode-batch``: ``default``, every side at its own default; ``tokens:8000``, every side at 8,000
source tokens a batch) our throughput and decoding benchmark (``scripts/bench/benchmark.py``, decoding the budget run's
final weights) immediately followed by that peer's harness (``../shared/bench/peers/run.sh run_<peer>.sh`` with
``BENCH_DECODE_BATCH`` set: throughput runs, its own 15-minute budget run, decoding). Like for like:

- training in ``--train-precision`` (fp32) on our side, as the peers train; our rows in other decoding precisions
  (``--decode-precision fp32,int8``) carry a suffix (``_int8``) and face the peers' fp32;
- training tokens/s with our batch building inside the timing, as the harness times the peers';
- decoding batches matched by ``tokens:N``: ours then hold N real source tokens a batch at every beam size, the
  peers' N tokens as their toolkit counts them.

Machines drift, so ratios are taken between neighbouring runs; the table gives medians over rounds. Writes
OUT/side_by_side.{json,md} and, with ``--json``, a record (date, commit, command, CPU) for docs/results/.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

PEERS = {"eole": "Eole", "onmt": "OpenNMT-py", "joey": "Joey NMT"}
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
         f"trainer.max_minutes={args.budget_minutes}", "trainer.test_beam=0", f"trainer.precision={args.train_precision}",
         f"hydra.run.dir={run_dir}"],
        log=folder / "ours_budget.log")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {"steps": metrics["steps"], "peak_rss_mb": metrics["peak_memory_mb"], "run_dir": str(run_dir)}


def tag(peer: str, batch: str) -> str:
    return f"{peer}_{batch.replace(':', '')}"


def ours_bench(args, folder: Path, checkpoint: str, peer: str, batch: str) -> dict:
    out = folder / f"ours_{tag(peer, batch)}.json"
    steps = ["--steps", "50", "--warmup", "10"] if args.smoke else []
    run([sys.executable, str(ROOT / "scripts" / "bench" / "benchmark.py"), "--config", "bench_small", "--data", str(args.data),
         "--checkpoint", checkpoint, "--json", str(out), "--decode-precision", args.decode_precision,
         "--decode-batch", batch, *steps, f"trainer.precision={args.train_precision}"],
        log=folder / f"ours_{tag(peer, batch)}.log")
    return json.loads(out.read_text())


def peer_bench(args, folder: Path, peer: str, batch: str) -> dict:
    bench_out = Path(args.peer_out).expanduser()
    env = {"BENCH_OUT": str(bench_out), "BENCH_SHARED_DATA": str(Path(args.data).resolve().parent),
           "BENCH_DECODE_BATCH": batch, "BENCH_BUDGET_S": str(round(args.budget_minutes * 60))}  # the budget ours had
    if args.smoke:
        env.update(SMOKE_ENV)
    run(["bash", str(Path(args.peers_dir) / "run.sh"), f"run_{peer}.sh"], env=env, log=folder / f"{tag(peer, batch)}.log")
    result = json.loads((bench_out / "results" / f"{peer}.json").read_text())
    (folder / f"{tag(peer, batch)}.json").write_text(json.dumps(result, indent=1))
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
    # with our batch building inside the timing, as the harness times the peers' steps
    out = {"train_tgt_tok_per_s": bench["train"]["tgt_tok_per_s_with_batching"], "peak_rss_mb": bench["train"]["peak_rss_mb"],
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


def table(med: dict, med_ratio: dict, keys: list[str]) -> str:
    """Figures down, (peer, batch) pairs across: ours beside that peer, theirs, the ratio (medians over rounds)."""
    head = ["figure (median)"]
    for k in keys:
        peer, batch = k.split("@")
        head += [f"nmt ({batch})", f"{PEERS[peer]} ({batch})", "ratio"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for fig in med[keys[0]]["ours"]:
        cells = []
        for k in keys:
            fmt = "{:,.2f}" if "bleu" in fig else "{:,.0f}"
            cells += [fmt.format(med[k]["ours"][fig]), fmt.format(med[k]["theirs"][fig]), f"{med_ratio[k][fig]:.2f}×"]
        lines.append(f"| {fig} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="the Tatoeba copy (train/dev.{zh,en})")
    p.add_argument("--peers", nargs="+", default=list(PEERS), choices=list(PEERS))
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--budget-minutes", type=float, default=15.0)
    p.add_argument("--smoke", action="store_true", help="1-minute budgets and short throughput runs, to try the pipeline")
    p.add_argument("--peers-dir", default=str(ROOT.parent / "shared" / "bench" / "peers"))
    p.add_argument("--peer-out", default="~/.cache/nmt-peers/bench")
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "side_by_side")
    p.add_argument("--json", type=Path, help="also write the round as a record here (docs/results/side_by_side*.json)")
    p.add_argument("--train-precision", default="fp32", help="our training precision (default fp32, as the peers train)")
    p.add_argument("--decode-batch", default="default,tokens:8000", type=lambda v: v.split(","),
                   help="decoding batch settings, each run on both sides (default: default,tokens:8000)")
    p.add_argument("--decode-precision", default="fp32",
                   help="our decoding precisions, comma-separated (scripts/bench/benchmark.py's flag), e.g. fp32,int8: "
                        "rows *_int8 put ours in int8 beside the peers' fp32")
    args = p.parse_args()
    if not (Path(args.peers_dir) / "run.sh").is_file():  # before the budget run, not 20 minutes into the sitting
        p.error(f"--peers-dir {args.peers_dir}: no run.sh there (the peer harness, ../shared/bench/peers)")
    if args.smoke:
        args.budget_minutes = 1.0
    keys = [f"{peer}@{batch}" for peer in args.peers for batch in args.decode_batch]
    rows: dict[str, dict[str, list[dict]]] = {k: {"ours": [], "theirs": [], "ratio": []} for k in keys}
    t0 = time.perf_counter()
    for r in range(1, args.rounds + 1):
        folder = args.out / f"round{r}"
        folder.mkdir(parents=True, exist_ok=True)
        budget = ours_budget(args, folder)
        # the final weights, as the peers score theirs: best.pt is chosen on the dev split, the peers' test set
        last = str(Path(budget["run_dir"]) / "checkpoints" / "last.pt")
        for k in keys:
            peer, batch = k.split("@")
            ours = figures_ours(ours_bench(args, folder, last, peer, batch), budget, extra_precisions(args))
            theirs = figures_peer(peer_bench(args, folder, peer, batch), extra_precisions(args))
            rows[k]["ours"].append(ours)
            rows[k]["theirs"].append(theirs)
            rows[k]["ratio"].append({f: ours[f] / theirs[f] if theirs[f] else float("nan") for f in ours})
            print(json.dumps({"round": r, "peer": peer, "batch": batch, "ours": ours, "theirs": theirs}), flush=True)
    med = {k: {side: {f: statistics.median(x[f] for x in xs) for f in xs[0]} for side, xs in v.items()}
           for k, v in rows.items()}
    med_ratio = {k: v["ratio"] for k, v in med.items()}
    text = table(med, med_ratio, keys)
    note = (f"\n{args.rounds} round(s), budget {args.budget_minutes:g} min{' (smoke settings)' if args.smoke else ''}, "
            f"training in {args.train_precision}, {(time.perf_counter() - t0) / 60:.0f} min in all.\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "side_by_side.md").write_text(text + "\n" + note)
    result = {"rows": rows, "median": med}
    (args.out / "side_by_side.json").write_text(json.dumps(result, indent=1))
    if args.json:
        save(args.json, record({"smoke": args.smoke, "budget_minutes": args.budget_minutes, "train_precision":
                                args.train_precision, "decode_precision": args.decode_precision, "keys": keys, **result}))
    print("\n" + text + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
