"""Average the weights of several checkpoints into one (Junczys-Dowmunt et al.; fairseq, Marian).

    python -m nmt.average --run outputs/<run> --last 5 --out outputs/<run>/checkpoints/avg.pt   # or nmt-average
    python -m nmt.average --out avg.pt a.pt b.pt c.pt

``--last K`` takes the K newest ``checkpoints/step*.pt`` of a run (kept with
``trainer.keep_last=K``). The result translates like any checkpoint; it holds no optimizer state.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt import checkpoint


def average(paths: list[Path]) -> dict:
    """The first checkpoint's config and tokenizer with the mean of every weight."""
    states = [checkpoint.load(p) for p in paths]
    first = states[0]
    for p, s in zip(paths[1:], states[1:]):
        if s["tokenizer"] != first["tokenizer"] or s["model"].keys() != first["model"].keys():
            raise checkpoint.CheckpointError(f"{p} is not a checkpoint of the same model as {paths[0]}")
    weights = {
        k: (sum(s["model"][k].double() for s in states) / len(states)).to(v.dtype) if v.is_floating_point() else v
        for k, v in first["model"].items()
    }
    out = {k: v for k, v in first.items() if k not in ("optimizer", "format")}
    out.update(model=weights, averaged_from=[str(p) for p in paths])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="*", type=Path)
    p.add_argument("--run", type=Path, help="a run directory: take its newest step checkpoints")
    p.add_argument("--last", type=int, default=5, help="with --run: how many (default 5)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    paths = list(args.checkpoints)
    if args.run:
        paths += sorted((args.run / "checkpoints").glob("step*.pt"))[-args.last :]
    if len(paths) < 2:
        p.error(f"need at least two checkpoints to average, found {len(paths)}")
    try:
        checkpoint.save(average(paths), args.out)
    except (checkpoint.CheckpointError, OSError) as e:
        sys.exit(f"nmt.average: error: {e}")  # to stderr, exit status 1
    print(f"averaged {len(paths)} checkpoints into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
