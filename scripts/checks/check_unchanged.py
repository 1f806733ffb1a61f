"""Behaviour unchanged by a refactor: the same fixed-seed training and the same translations at two commits.

    python scripts/checks/check_unchanged.py 7dba35a --model outputs/demo --json unchanged.json

At ``BASE`` (a git worktree in a temporary folder) and at the working tree:
1. a tiny fixed-seed run (2-layer encoder and decoder with dropout, 60 updates, two validations):
   the final weights' md5 and the dev history (loss, BLEU);
2. with ``--model``, ``nmt.translate`` of the 1,000 Tatoeba dev lines, greedy and beam 5: md5 of each output;
3. with ``--speed N``, N rounds alternating the two: bench-small training target tokens/s (scripts/bench/benchmark.py,
   fp32, 150 steps after 30) and, with ``--model``, ``nmt.evaluate``'s greedy and beam-5 sentences/s (at each
   ``--precision``, fp32 by default); medians.
Exit status 1 if an output differs (speed is reported, not judged). Writes a record (date, commits, command,
CPU, figures) with ``--json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import pyarrow.parquet as pq
import torch

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "data" / "tatoeba" / "dev.parquet"  # the packaged corpus's dev split, the lines translated
sys.path.insert(0, str(REPO))
from scripts.records.record import git, record, save  # noqa: E402

TINY = ["data=hsk", "model.emb_size=32", "model.hidden_size=32", "model.encoder_layers=2", "model.decoder_layers=2",
        "model.dropout=0.3", "tokenizer.src_vocab_size=2000", "tokenizer.tgt_vocab_size=500", "data.dev_size=100",
        "data.test_size=100", "trainer.device=cpu", "trainer.threads=1", "trainer.test_beam=0", "trainer.batch_tokens=400",
        "trainer.valid_max_sentences=50", "trainer.max_steps=60", "trainer.valid_every=30", "trainer.log_every=10"]


def run(code: Path, env: dict, *args: str) -> None:
    """``python -m ...`` with the ``nmt`` of ``code`` (its folder first on the path)."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=code, env=dict(env, PYTHONPATH=str(code)),
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{code}: {' '.join(args[:3])} failed:\n{proc.stderr[-2000:]}")


def split_layer_name(key: str) -> str:
    """A parameter's name as the layer-per-module RNNs call it: before 1c39e86 the decoder's layers were one nn.LSTM
    (``decoder.rnn.weight_ih_l1``, now ``decoder.rnn.1.weight_ih_l0``), so md5s compare across that change."""
    m = re.fullmatch(r"(decoder\.rnn)\.(weight|bias)_(ih|hh)_l(\d+)", key)
    return f"{m[1]}.{m[4]}.{m[2]}_{m[3]}_l0" if m else key


def training(code: Path, out: Path, env: dict) -> dict:
    """The tiny run's final weights (md5 of every tensor's bytes, by name) and dev history."""
    run(code, env, "nmt.train", *TINY, f"hydra.run.dir={out}")
    weights = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["model"]
    weights = {split_layer_name(k): v for k, v in weights.items()}
    md5 = hashlib.md5(b"".join(v.numpy().tobytes() for _, v in sorted(weights.items()))).hexdigest()
    history = json.loads((out / "metrics.json").read_text())["history"]
    return {"weights_md5": md5, "history": [[r["step"], r["valid_loss"], r["valid_bleu"]] for r in history]}


def decoding(code: Path, model: str, src: Path, out: Path, env: dict) -> dict:
    """md5 of ``nmt.translate``'s output for greedy and beam 5, and its BLEU against the dev references (an output
    that changes is then judged by its score)."""
    import sacrebleu

    refs = pq.read_table(DEV)["en"].to_pylist()
    figures = {}
    for beam in (1, 5):
        hyp = out / f"beam{beam}.txt"
        run(code, env, "nmt.translate", model, "--beam", str(beam), "--device", "cpu", "--input", str(src),
            "--output", str(hyp))
        figures[f"beam{beam}_md5"] = hashlib.md5(hyp.read_bytes()).hexdigest()
        figures[f"beam{beam}_bleu"] = round(sacrebleu.corpus_bleu(hyp.read_text(encoding="utf-8").splitlines(), [refs]).score, 2)
    return figures


def speed(code: Path, model: Optional[str], env: dict, out: Path, dev: tuple[Path, Path],
          precisions: Sequence[str] = ("fp32",)) -> dict:
    """One round at ``code``: training target tokens/s and, with ``model``, decoding sentences/s of the ``dev``
    (source, references) files at each of ``precisions`` (keys suffixed but for fp32). The files, not the model's
    ``--split dev``: a run's relative data.dir would resolve against the base's worktree."""
    figures_json = out / "bench.json"
    bench = "scripts.bench.benchmark" if (code / "scripts" / "bench").is_dir() else "scripts.benchmark"  # before the sort
    run(code, env, bench, "--config", "bench_small", "--steps", "150", "--warmup", "30", "--no-decode",
        "--json", str(figures_json), "trainer.precision=fp32")
    figures = {"train_tgt_tok_per_s": json.loads(figures_json.read_text())["train"]["tgt_tok_per_s"]}
    for precision, beam in ((p, b) for p in precisions for b in (1, 5)) if model else ():
        proc = subprocess.run([sys.executable, "-m", "nmt.evaluate", model, "--src", str(dev[0]), "--ref", str(dev[1]),
                               "--beam", str(beam),
                               "--device", "cpu", "--precision", precision, "--json"], cwd=code,
                              env=dict(env, PYTHONPATH=str(code)), capture_output=True, text=True, check=True)
        suffix = "" if precision == "fp32" else f"_{precision}"
        figures[f"beam{beam}_sents_per_s{suffix}"] = json.loads(proc.stdout)["sentences_per_s"]
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the commit to compare the working tree with")
    p.add_argument("--model", help="a trained run or checkpoint to decode the dev lines with")
    p.add_argument("--speed", type=int, default=0, metavar="N", help="N alternating rounds of speed figures")
    p.add_argument("--precision", default="fp32", help="decoding precisions timed, comma-separated (fp32,int8)")
    p.add_argument("--json")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="unchanged_"))
    env = dict(os.environ, NMT_CACHE=str(tmp / "cache"), CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
    subprocess.run(["git", "worktree", "add", "-f", "--detach", str(tmp / "base_code"), args.base], cwd=REPO, check=True,
                   capture_output=True)
    dev = pq.read_table(DEV)
    src, ref = tmp / "dev.zh", tmp / "dev.en"
    for path, side in ((src, "zh"), (ref, "en")):
        path.write_text("".join(s.replace("\n", " ") + "\n" for s in dev[side].to_pylist()), encoding="utf-8")
    sides = {}
    try:
        for name, code in (("base", tmp / "base_code"), ("working_tree", REPO)):
            (tmp / name).mkdir()
            sides[name] = training(code, tmp / name / "run", env)
            if args.model:
                sides[name].update(decoding(code, args.model, src, tmp / name, env))
            print(name, json.dumps(sides[name]), flush=True)
        rounds: dict[str, list[dict]] = {"base": [], "working_tree": []}
        for i in range(args.speed):  # alternating, so that machine drift hits both alike
            for name, code in (("base", tmp / "base_code"), ("working_tree", REPO)):
                rounds[name].append(speed(code, args.model, env, tmp / name, (src, ref), args.precision.split(",")))
                print(f"speed round {i + 1}", name, json.dumps(rounds[name][-1]), flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tmp / "base_code")], cwd=REPO, capture_output=True)
    same = sides["base"] == sides["working_tree"]
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rounds.items() if rs}
    if medians:
        print("speed, medians, working tree / base: " + ", ".join(
            f"{k} {medians['working_tree'][k] / medians['base'][k]:.3f}" for k in medians["base"]))
    differ = [k for k in sides["base"] if sides["base"][k] != sides["working_tree"].get(k)]
    print("unchanged" if same else "CHANGED: " + ", ".join(differ))
    save(args.json, record({"base": args.base, "head": git("rev-parse", "HEAD"), "unchanged": same, **sides,
                            "dirty": bool(git("status", "--porcelain", "nmt")),  # nmt/ differs from the commit
                            "speed_rounds": rounds, "speed_medians": medians}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
