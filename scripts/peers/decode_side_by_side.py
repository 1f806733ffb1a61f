"""Decoding speed beside Eole and OpenNMT-py in one sitting, from the models side_by_side.py rounds already trained.

    python scripts/peers/decode_side_by_side.py --data ../shared/data/tatoeba-cmn-eng \\
        --ours outputs/side_by_side/round1/ours_budget/checkpoints/last.pt \\
        --eole ~/.cache/nmt-peers/bench/work/eole/budget/step_8200 \\
        --onmt ~/.cache/nmt-peers/bench/work/onmt/budget/model_step_8000.pt --rounds 3 --json docs/results/peer_decode.json

A decoding change needs a new ratio, not a new 15-minute training run on every side: this script decodes the
peers' test set (the Tatoeba dev split) with the trained models, alternating ours and each peer's in each round,
at every batch setting of ``--batch`` (``default``: each side's own, 30 sentences for both peers; ``tokens:N``: N
source tokens a batch on every side), greedy and beam 5 (ours also with the peers' stop rule, ``beam5_first``),
and reports medians and ratios. Ours is timed as ``scripts/bench/benchmark.py`` times it (translation only), a peer's as
the harness does (``-report_time``, parsed by the harness's ``bench_util.py decode``; BLEU by its ``score``), with
the harness's flags (``run_eole.sh``, ``run_onmt.sh``), every side on ``--threads`` threads. Writes a record
(date, commit, command, CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from nmt.checkpoint import load_model  # noqa: E402
from nmt.device import set_threads  # noqa: E402
from scripts.bench.benchmark import compose_config, decoding_speed, prepare_corpus  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

BEAMS = (("greedy", 1), ("beam5", 5))  # Eole's searches; ours also runs beam 5 with Eole's stop rule:
OURS = (("greedy", 1, "full"), ("beam5", 5, "full"), ("beam5_first", 5, "first"))  # (name, beam, stop)
PEER_DEFAULT = "sents:30"  # both peers' default batch: -batch_size 30 -batch_type sents (run_eole.sh, run_onmt.sh)
PEER_COMMAND = {"eole": ["eole.bin.main", "predict", "-model_path"], "onmt": ["onmt.bin.translate", "-gpu", "-1", "-model"]}
PEER_NAME = {"eole": "Eole", "onmt": "OpenNMT-py"}


def peer_decode(peer: str, bench: Path, checkpoint: str, beam: int, batch: str, threads: int, work: Path) -> dict:
    """One decode of the harness's test set by ``peer`` (eole, onmt), timed and scored by the harness's own tools
    (its venvs beside ``bench``, as ../shared/bench/peers/run.sh makes them)."""
    venvs, src = bench.parent, bench / "data" / "sp" / "test.zh"
    kind, _, size = (PEER_DEFAULT if batch == "default" else batch).partition(":")
    hyp, log, timev = work / "hyp.txt", work / "decode.log", work / "decode.timev"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    command = [str(venvs / f"{peer}-venv" / "bin" / "python"), str(bench / "sigint_run.py"), *PEER_COMMAND[peer]]
    with open(log, "w") as out:
        subprocess.run(["/usr/bin/time", "-v", "-o", str(timev), *command, checkpoint,
                        "-src", str(src), "-output", str(hyp), "-beam_size", str(beam),
                        "-max_length", "100", "-max_length_ratio", "0", "-length_penalty", "wu", "-alpha", "1.0",
                        "-batch_type", kind, "-batch_size", size, "-report_time"],
                       env=env, cwd=bench, stdout=out, stderr=subprocess.STDOUT, check=True)
    bu = [str(venvs / "bench-venv" / "bin" / "python"), str(bench / "bench_util.py")]
    n = sum(1 for _ in open(src, encoding="utf-8"))
    subprocess.run([*bu, "decode", "--toolkit", peer, "--log", str(log), "--timev", str(timev), "--hyp", str(hyp),
                    "--n", str(n), "--beam", str(beam), "--batch-size", size, "--batch-type", kind,
                    "--batch-setting", batch, "--out", str(work / "decode.json")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*bu, "score", "--hyp", str(hyp), "--out", str(work / "score.json")], check=True, stdout=subprocess.DEVNULL)
    timing = json.loads((work / "decode.json").read_text())
    return {"sents_per_s": timing["sents_per_s"], "bleu": json.loads((work / "score.json").read_text())["bleu"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="the Tatoeba copy (train/dev.{zh,en}) the models trained on")
    p.add_argument("--ours", required=True, help="our trained checkpoint (a side_by_side round's ours_budget last.pt)")
    p.add_argument("--eole", help="Eole's trained model folder (the harness's work/eole/budget/step_N)")
    p.add_argument("--onmt", help="OpenNMT-py's trained checkpoint (the harness's work/onmt/budget/model_step_N.pt)")
    p.add_argument("--bench", type=Path, default=Path("~/.cache/nmt-peers/bench").expanduser(),
                   help="the harness's writable copy (data/sp, bench_util.py; its venvs beside it)")
    p.add_argument("--batch", default="default,tokens:8000", type=lambda v: v.split(","))
    p.add_argument("--precisions", default="fp32", help="our decoding precisions (int8: rows *_int8 beside the peers' fp32)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    peers = {name: model for name in PEER_COMMAND if (model := getattr(args, name))}
    if not peers:
        p.error("name at least one peer's trained model: --eole or --onmt")
    for need in (args.bench / "bench_util.py", *map(Path, peers.values()), Path(args.ours)):
        if not need.exists():
            p.error(f"{need}: not found")
    set_threads(args.threads)
    corpus = prepare_corpus(compose_config("bench_small", [], str(args.data)))
    src, ref = list(corpus.dev["src"]), list(corpus.dev["tgt"])
    model, tok, cfg, _ = load_model(args.ours, torch.device("cpu"))
    precisions = args.precisions.split(",")
    samples: dict = {b: {"ours": {f"{n}_{p}": [] for n, _, _ in OURS for p in precisions},
                         **{peer: {n: [] for n, _ in BEAMS} for peer in peers}} for b in args.batch}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for batch in args.batch:
                for prec in precisions:
                    figs = decoding_speed(model, tok, cfg, src, ref, torch.device("cpu"), runs=OURS, precisions=[prec],
                                          batch=batch)
                    for name, _, _ in OURS:
                        samples[batch]["ours"][f"{name}_{prec}"].append(figs[name + ("" if prec == "fp32" else f"_{prec}")])
                for peer, model_path in peers.items():
                    for name, beam in BEAMS:
                        samples[batch][peer][name].append(peer_decode(peer, args.bench, model_path, beam, batch,
                                                                      args.threads, Path(tmp)))
                print(json.dumps({"round": r + 1, "batch": batch, **{side: {k: v[-1]["sents_per_s"] for k, v in
                                  figs.items()} for side, figs in samples[batch].items()}}), flush=True)
    rows = []
    for batch, sides in samples.items():
        for peer in peers:
            for key, xs in sides["ours"].items():
                name, prec = key.rsplit("_", 1)
                theirs = sides[peer][name.removesuffix("_first")]  # the peers' beam ends at the first finished
                t, o = (statistics.median(x["sents_per_s"] for x in side) for side in (theirs, xs))
                rows.append({"peer": peer, "batch": batch, "search": name, "precision": prec, "ours_sents_per_s": o,
                             "peer_sents_per_s": t, "ratio": o / t, "ours_bleu": xs[0]["bleu"], "peer_bleu": theirs[0]["bleu"]})
                print(f"{PEER_NAME[peer]:<11}{batch:<13}{name:<12}{prec:<5} ours {o:7,.0f}  theirs {t:7,.0f}  {o / t:5.2f}×  "
                      f"BLEU {xs[0]['bleu']:.2f} / {theirs[0]['bleu']:.2f}")
    save(args.json, record({"threads": args.threads, "rounds": args.rounds, "ours": args.ours, "peers": peers, "rows": rows,
                            "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
