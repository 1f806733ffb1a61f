"""Decoding speed beside Eole in one sitting, from the models a side_by_side.py round already trained.

    python scripts/decode_side_by_side.py --data ../shared/data/tatoeba-cmn-eng \\
        --ours outputs/side_by_side/round1/ours_budget/checkpoints/last.pt \\
        --eole ~/.cache/nmt-peers/bench/work/eole/budget/step_8200 --rounds 3 --json docs/results/decode_sbs.json

A decoding change needs a new ratio, not a new 15-minute training run on both sides: this script decodes the
peers' test set (the Tatoeba dev split) with both trained models, alternating ours and Eole's in each round, at
every batch setting of ``--batch`` (``default``: each side's own, Eole 30 sentences; ``tokens:N``: N source tokens
a batch on both sides), greedy and beam 5 (ours also with Eole's stop rule, ``beam5_first``), and reports
medians and ratios. Ours is timed as
``scripts/benchmark.py`` times it (translation only), Eole's as the harness does (``eole predict -report_time``,
the loop over the batches, parsed by the harness's ``bench_util.py decode``; BLEU by its ``score``), with the
harness's flags (``run_eole.sh``), both on ``--threads`` threads. Writes a record (date, commit, command, CPU).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from nmt.checkpoint import load_model  # noqa: E402
from nmt.device import cpu_info, set_threads  # noqa: E402
from nmt.run_folder import git_commit  # noqa: E402
from scripts.benchmark import compose_config, decoding_speed, prepare_corpus  # noqa: E402

BEAMS = (("greedy", 1), ("beam5", 5))  # Eole's searches; ours also runs beam 5 with Eole's stop rule:
OURS = (("greedy", 1, "full"), ("beam5", 5, "full"), ("beam5_first", 5, "first"))  # (name, beam, stop)
EOLE_DEFAULT = "sents:30"  # `eole predict`'s -batch_size 30 -batch_type sents (run_eole.sh)


def eole_decode(bench: Path, checkpoint: str, beam: int, batch: str, threads: int, work: Path) -> dict:
    """One ``eole predict`` of the harness's test set, timed and scored by the harness's own tools."""
    kind, _, size = (EOLE_DEFAULT if batch == "default" else batch).partition(":")
    hyp, log, timev = work / "hyp.txt", work / "decode.log", work / "decode.timev"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    eole = [str(bench.parent / "eole-venv" / "bin" / "python"), str(bench / "sigint_run.py"), "eole.bin.main", "predict"]
    with open(log, "w") as out:
        subprocess.run(["/usr/bin/time", "-v", "-o", str(timev), *eole, "-model_path", checkpoint,
                        "-src", str(bench / "data" / "sp" / "test.zh"), "-output", str(hyp), "-beam_size", str(beam),
                        "-max_length", "100", "-max_length_ratio", "0", "-length_penalty", "wu", "-alpha", "1.0",
                        "-batch_type", kind, "-batch_size", size, "-report_time"],
                       env=env, cwd=bench, stdout=out, stderr=subprocess.STDOUT, check=True)
    bu = [str(bench.parent / "bench-venv" / "bin" / "python"), str(bench / "bench_util.py")]
    n = sum(1 for _ in open(bench / "data" / "sp" / "test.zh", encoding="utf-8"))
    subprocess.run([*bu, "decode", "--toolkit", "eole", "--log", str(log), "--timev", str(timev), "--hyp", str(hyp),
                    "--n", str(n), "--beam", str(beam), "--batch-size", size, "--batch-type", kind,
                    "--batch-setting", batch, "--out", str(work / "decode.json")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*bu, "score", "--hyp", str(hyp), "--out", str(work / "score.json")], check=True,
                   stdout=subprocess.DEVNULL)
    timing = json.loads((work / "decode.json").read_text())
    return {"sents_per_s": timing["sents_per_s"], "bleu": json.loads((work / "score.json").read_text())["bleu"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="the Tatoeba copy (train/dev.{zh,en}) the models trained on")
    p.add_argument("--ours", required=True, help="our trained checkpoint (a side_by_side round's ours_budget last.pt)")
    p.add_argument("--eole", required=True, help="Eole's trained model folder (the harness's work/eole/budget/step_N)")
    p.add_argument("--bench", type=Path, default=Path("~/.cache/nmt-peers/bench").expanduser(),
                   help="the harness's writable copy (data/sp, bench_util.py; its venvs beside it)")
    p.add_argument("--batch", default="default,tokens:8000", type=lambda v: v.split(","))
    p.add_argument("--precisions", default="fp32", help="our decoding precisions (int8: rows *_int8 beside Eole's fp32)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    for need in (args.bench / "bench_util.py", Path(args.eole), Path(args.ours)):
        if not need.exists():
            p.error(f"{need}: not found")
    set_threads(args.threads)
    corpus = prepare_corpus(compose_config("bench_small", [], str(args.data)))
    src, ref = list(corpus.dev["src"]), list(corpus.dev["tgt"])
    model, tok, cfg, _ = load_model(args.ours, torch.device("cpu"))
    precisions = args.precisions.split(",")
    samples: dict = {b: {"ours": {f"{n}_{p}": [] for n, _, _ in OURS for p in precisions},
                         "eole": {n: [] for n, _ in BEAMS}} for b in args.batch}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for batch in args.batch:
                for prec in precisions:
                    figs = decoding_speed(model, tok, cfg, src, ref, torch.device("cpu"), runs=OURS, precisions=[prec],
                                          batch=batch)
                    for name, _, _ in OURS:
                        samples[batch]["ours"][f"{name}_{prec}"].append(figs[name + ("" if prec == "fp32" else f"_{prec}")])
                for name, beam in BEAMS:
                    samples[batch]["eole"][name].append(eole_decode(args.bench, args.eole, beam, batch, args.threads,
                                                                    Path(tmp)))
                print(json.dumps({"round": r + 1, "batch": batch, "ours": {k: v[-1]["sents_per_s"] for k, v in
                                  samples[batch]["ours"].items()}, "eole": {k: v[-1]["sents_per_s"] for k, v in
                                                                           samples[batch]["eole"].items()}}), flush=True)
    rows = []
    for batch, sides in samples.items():
        for key, xs in sides["ours"].items():
            name, prec = key.rsplit("_", 1)
            peer = sides["eole"][name.removesuffix("_first")]  # Eole's beam ends at the first finished
            theirs = statistics.median(x["sents_per_s"] for x in peer)
            ours = statistics.median(x["sents_per_s"] for x in xs)
            rows.append({"batch": batch, "search": name, "precision": prec, "ours_sents_per_s": ours,
                         "eole_sents_per_s": theirs, "ratio": ours / theirs, "ours_bleu": xs[0]["bleu"],
                         "eole_bleu": peer[0]["bleu"]})
            print(f"{batch:<14}{name:<8}{prec:<6}ours {ours:8,.0f}  eole {theirs:8,.0f}  {ours / theirs:5.2f}×  "
                  f"BLEU {xs[0]['bleu']:.2f} / {peer[0]['bleu']:.2f}")
    if args.json:
        record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(),
                  "command": sys.argv, "cpu": cpu_info(), "threads": args.threads, "rounds": args.rounds,
                  "ours": args.ours, "eole": args.eole, "rows": rows, "samples": samples}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
