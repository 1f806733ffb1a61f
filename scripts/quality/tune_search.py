"""The search's settings (beam, length penalty alpha, stop rule) chosen on the dev split, as a record.

    python scripts/quality/tune_search.py RUN [RUN ...] --json docs/results/tune_search.json

Each trained run (a folder: its best.pt, or a checkpoint) decodes its dev and test splits under every
combination of ``--beams``, ``--alphas`` and ``--stops``. The setting with the best dev BLEU is picked per run,
by dev alone; its test BLEU is set beside the default's (beam 5, alpha 1.0, stop full: what training's test
evaluation and ``nmt.evaluate`` use), with each decode's sentences/s (threads: the machine's). The record
(date, commit, command, CPU) is rewritten after every run.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from nmt.data.corpus import load_corpus
from nmt.translator import SearchSettings, Translator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

DEFAULT = SearchSettings()


def tune(run: str, beams: list[int], alphas: list[float], stops: list[str]) -> dict:
    """Dev and test BLEU of one run under every setting; the dev-best setting and the default's figures."""
    t = Translator.load(run, "cpu")
    splits = load_corpus(t.config.data, need=("dev", "test"), splits=("dev", "test"))
    rows = []
    for beam, alpha, stop in itertools.product(beams, alphas, stops):
        row = {"beam": beam, "alpha": alpha, "stop": stop}
        for name in ("dev", "test"):
            src = list(splits[name]["src"])
            start = time.perf_counter()
            s = t.evaluate(src, [list(splits[name]["tgt"])], beam=beam, alpha=alpha, stop=stop)
            row[f"{name}_bleu"], row[f"{name}_sents_per_s"] = s.bleu, len(src) / (time.perf_counter() - start)
        rows.append(row)
        print(run, row, flush=True)
    best = max(rows, key=lambda r: r["dev_bleu"])
    default = next((r for r in rows if (r["beam"], r["alpha"], r["stop"]) == (DEFAULT.beam, DEFAULT.alpha, DEFAULT.stop)),
                   None)
    return {"run": run, "rows": rows, "dev_best": best, "default": default}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run folders or checkpoints")
    p.add_argument("--beams", default="5")
    p.add_argument("--alphas", default="0.0,0.6,1.0,1.4")
    p.add_argument("--stops", default="full,first")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    beams = [int(b) for b in args.beams.split(",")]
    alphas = [float(a) for a in args.alphas.split(",")]
    stops = args.stops.split(",")
    rec = record({"runs": []})
    for run in args.runs:
        rec["runs"].append(tune(run, beams, alphas, stops))
        save(args.json, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
