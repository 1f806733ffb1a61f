"""BLEU and chrF by source length (Luong et al. 2015, Figure 6) for trained runs, on the dev and test splits, as a
record: what speaks to whether an attention variant helps long sentences.

    python scripts/quality/by_length.py outputs/global outputs/local_m outputs/local_p --json docs/results/by_length.json

Each run is scored by ``python -m nmt.evaluate RUN --split dev --split test --beam B --by-length --json`` (length in
source sentencepiece pieces; ``--buckets`` as evaluate's); the run's attention comes from its resolved config.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402


def scored(run: str, beam: int, buckets: str) -> dict:
    """One run's rows (one a split) from nmt.evaluate, with its attention's score and mode."""
    cfg = yaml.safe_load((Path(run) / ".hydra" / "config.yaml").read_text())
    cmd = [sys.executable, "-m", "nmt.evaluate", run, "--split", "dev", "--split", "test", "--beam", str(beam),
           "--by-length", "--buckets", buckets, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{run}: nmt.evaluate failed: {proc.stderr.strip().splitlines()[-1:]}")
    rows = [{k: r[k] for k in ("set", "sentences", "bleu", "chrf", "by_length")} for r in json.loads(proc.stdout)]
    att = cfg["model"]["attention"]
    return {"run": run, "score": att["score"], "mode": att["mode"], "steps": json.loads(
        (Path(run) / "metrics.json").read_text())["steps"], "rows": rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run folders")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--buckets", default="5,10,15,20,30,40", help="upper bounds, as nmt.evaluate's --buckets")
    p.add_argument("--json", help="write the record here")
    args = p.parse_args()
    runs = [scored(r, args.beam, args.buckets) for r in args.runs]
    for r in runs:
        for row in r["rows"]:
            cells = ", ".join(f"{b['bucket']}: {b['bleu']:.2f}" for b in row["by_length"])
            print(f"{r['score']}-{r['mode']} {row['set']}: BLEU {row['bleu']:.2f}; {cells}")
    save(args.json, record({"beam": args.beam, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
