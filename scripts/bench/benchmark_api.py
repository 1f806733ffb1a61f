"""The Python API against the command, as users run them: minor page faults and sentences/s of a beam search over a
corpus split, each pass a fresh process, the ways alternating round by round (the machine's speed drifts), written
as a record. ``Translator.load`` sets the process up as the commands do (threads, glibc keeping freed blocks); this
shows that a caller who never heard of ``set_threads`` decodes as fast as ``nmt.evaluate`` does.

    python scripts/bench/benchmark_api.py RUN --split dev --beam 5 --rounds 3 --json docs/results/api_vs_cli.json
    python scripts/bench/benchmark_api.py RUN --lines 200 --rounds 1          # the split's first 200 lines only

The ways: ``cli`` is ``python -m nmt.evaluate RUN --split dev --beam 5 --device cpu --json``; ``api`` a fresh
Python process calling ``Translator.load(RUN, "cpu")`` and ``evaluate`` with nothing set up before; ``api_no_setup``
the same with ``setup_process=False`` (the API before it set the process up). Page faults: the whole process's (start,
imports, loading, the pass: ``RUSAGE_CHILDREN``), and the pass's alone where the API's process can count them.
Sentences/s: decoding and scoring, as ``nmt.evaluate``'s ``sent/s``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.bench.timing import alternate, child_json  # noqa: E402
from scripts.records.record import record, save  # noqa: E402

WAYS = ("cli", "api", "api_no_setup")


def child_pass(args: argparse.Namespace) -> dict:
    """In this fresh process: load through the API (setting the process up or not), then one timed ``evaluate``."""
    import torch

    from nmt import Translator

    t = Translator.load(args.model, "cpu", setup_process=args.child == "api")
    src, refs = read_set(args, t.config)
    faults, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    scores = t.evaluate(src, refs, beam=args.beam)
    seconds = time.perf_counter() - t0
    return {"sentences": len(src), "bleu": scores.bleu, "sentences_per_s": len(src) / seconds,
            "pass_minflt": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, "threads": torch.get_num_threads()}


def read_set(args: argparse.Namespace, cfg) -> tuple[list[str], list[list[str]]]:
    """The split from the corpus the model was trained on, or the files the parent wrote (``--lines``)."""
    if args.src:
        from nmt.data.text import read_lines

        return read_lines(Path(args.src)), [read_lines(Path(args.ref))]
    from nmt.data.corpus import load_corpus

    split = load_corpus(cfg.data, need=(args.split,), splits=(args.split,))[args.split]
    return list(split["src"]), [list(split["tgt"])]


def write_first_lines(model: str, split: str, lines: int, folder: Path) -> list[str]:
    """The split's first ``lines`` pairs as files, for both ways: ``--src F --ref G`` arguments."""
    from nmt import checkpoint
    from nmt.config import from_dict
    from nmt.data.corpus import load_corpus

    cfg = from_dict(checkpoint.load(model)["config"])
    data = load_corpus(cfg.data, need=(split,), splits=(split,))[split]
    if len(data) < lines:
        raise SystemExit(f"--lines {lines}: the {split} split holds only {len(data)} pairs")
    (folder / "src.txt").write_text("".join(s + "\n" for s in data["src"][:lines]), encoding="utf-8")
    (folder / "ref.txt").write_text("".join(s + "\n" for s in data["tgt"][:lines]), encoding="utf-8")
    return ["--src", str(folder / "src.txt"), "--ref", str(folder / "ref.txt")]


def command(way: str, args: argparse.Namespace, set_args: list[str]) -> list[str]:
    """The command line of one pass of ``way`` (run from the repository's root: the model's path made absolute)."""
    model = str(Path(args.model).resolve())
    if way == "cli":
        return [sys.executable, "-m", "nmt.evaluate", model, *set_args, "--beam", str(args.beam), "--device", "cpu", "--json"]
    return [sys.executable, str(Path(__file__).resolve()), model, *set_args, "--beam", str(args.beam), "--child", way]


def one_pass(way: str, cmd: list[str]) -> dict:
    """Run one pass in a fresh process: its figures and the whole process's minor page faults."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    out = child_json(cmd, f"the {way} pass", cwd=ROOT)
    if not isinstance(out, dict):
        raise SystemExit(f"the {way} pass printed {out!r}, not a JSON object")
    out["process_minflt"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    return out


def summarize(way: str, cmd: list[str], passes: list[dict]) -> dict:
    """One way's row: every pass's figures and their medians."""
    row = {"way": way, "command": cmd[1:] if way == "cli" else ["<this script>", *cmd[2:]],
           "sentences": passes[0]["sentences"], "bleu": passes[0]["bleu"]}
    for key in ("process_minflt", "pass_minflt", "sentences_per_s", "threads"):
        if key in passes[0]:
            row[key] = [p[key] for p in passes]
            row[f"median_{key}"] = statistics.median(row[key])
    return row


def figures(args: argparse.Namespace, rows: list[dict]) -> dict:
    """What ran and each way's figures, with the API's over the command's (medians)."""
    by = {r["way"]: r for r in rows}
    ratios = {w: {"process_minflt": by[w]["median_process_minflt"] / max(1, by["cli"]["median_process_minflt"]),
                  "sentences_per_s": by[w]["median_sentences_per_s"] / by["cli"]["median_sentences_per_s"]}
              for w in by if w != "cli" and "cli" in by}
    return {"model": args.model, "split": args.split, "lines": args.lines, "beam": args.beam, "rounds": args.rounds,
            "rows": rows, "over_cli": ratios}


def run_rounds(args: argparse.Namespace, set_args: list[str]) -> list[dict]:
    """Every way once a round, the order reversed every other round; a row per way."""
    cmds = {w: command(w, args, set_args) for w in args.ways}
    passes = alternate(args.ways, args.rounds, lambda way: one_pass(way, cmds[way]))
    return [summarize(w, cmds[w], passes[w]) for w in args.ways]


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="run directory or checkpoint")
    p.add_argument("--split", default="dev", help="a split of the model's training corpus (default dev)")
    p.add_argument("--lines", type=int, help="only the split's first N lines (default: all)")
    p.add_argument("--beam", type=int, default=5, help="beam size (default 5)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, the ways alternating (default 3)")
    p.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)} (default all)")
    p.add_argument("--json", type=Path, help="write the record here (docs/results/...)")
    p.add_argument("--child", choices=WAYS[1:], help=argparse.SUPPRESS)  # internal: one API pass
    p.add_argument("--src", help=argparse.SUPPRESS)  # internal: the files of --lines
    p.add_argument("--ref", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.ways = args.ways.split(",")
    if bad := [w for w in args.ways if w not in WAYS]:
        p.error(f"--ways: {', '.join(bad)} not in {', '.join(WAYS)}")
    for name in ("beam", "rounds", "lines"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be 1 or more, got {getattr(args, name)}")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(child_pass(args)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        set_args = write_first_lines(args.model, args.split, args.lines, Path(tmp)) if args.lines else ["--split", args.split]
        rows = run_rounds(args, set_args)
    rec = record(figures(args, rows), argv)
    for r in rows:
        pass_faults = f", pass {r['median_pass_minflt']:,.0f}" if "pass_minflt" in r else ""
        print(f"{r['way']:<13} BLEU {r['bleu']:.2f}: {r['median_sentences_per_s']:,.1f} sent/s, minor page faults: "
              f"process {r['median_process_minflt']:,.0f}{pass_faults} (medians of {args.rounds})")
    save(args.json, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
