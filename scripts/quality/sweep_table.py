"""Tabulate Hydra multiruns of ``nmt.train``: one Markdown row per run, best dev BLEU first.

    python -m nmt.train -m +experiment=zh_en_local_p trainer.lr=0.001,0.002 hydra.sweep.dir=multirun/lr
    python scripts/quality/sweep_table.py multirun/lr [multirun/other ...] [--dev-beam 5]

Columns: the experiment and the other overrides, updates, training target tokens/s, best dev BLEU (validation
decoding, greedy by default), dev BLEU with ``--dev-beam`` (the best checkpoint decoded again;
optional, a few seconds a run), dev chrF, and test BLEU/chrF (beam ``trainer.test_beam``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def dev_bleu(run: Path, beam: int) -> tuple[float, float]:
    """BLEU and chrF of the run's best checkpoint on its dev split at ``beam``."""
    import torch

    from nmt.data.corpus import load_corpus
    from nmt.data.normalize import src_normalizer
    from nmt.decode import evaluate, load_models

    models, tok, cfg = load_models([str(run / "checkpoints" / "best.pt")], torch.device("cpu"))
    dev = load_corpus(cfg.data, need=("dev",), splits=("dev",))["dev"]
    scores, _ = evaluate(models, tok, src_normalizer(cfg.data), list(dev["src"]), [list(dev["tgt"])],
                         cfg.data.tgt_lang, beam=beam)
    return scores.bleu, scores.chrf


def row(run: Path, beam: int) -> dict:
    overrides = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text()) or []
    m = json.loads((run / "metrics.json").read_text())
    best = max(m["history"], key=lambda r: r["valid_bleu"])
    experiment = next((o.split("=", 1)[1] for o in overrides if o.startswith("+experiment=")), "")
    out = {"experiment": experiment,
           "overrides": " ".join(o for o in overrides if not o.startswith("+experiment")) or "(none)",
           "steps": m["steps"], "tok/s": round(m["train_tgt_tok_per_s"]), "dev BLEU": round(m["best_valid_bleu"], 2),
           "dev chrF": round(best["valid_chrf"], 2), "dev ppl": round(best["valid_ppl"], 2),
           "test BLEU": round(m.get("test_bleu", float("nan")), 2), "test chrF": round(m.get("test_chrf", float("nan")), 2)}
    if beam:
        b, c = dev_bleu(run, beam)
        out[f"dev BLEU beam {beam}"] = round(b, 2)
        out[f"dev chrF beam {beam}"] = round(c, 2)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweeps", nargs="+", type=Path, help="multirun folders (hydra.sweep.dir) or run folders")
    p.add_argument("--dev-beam", type=int, default=0, help="also decode dev with this beam (0: no)")
    args = p.parse_args()
    runs = sorted({r.parent for s in args.sweeps for r in s.glob("**/metrics.json")})
    if not runs:
        sys.exit(f"no finished runs (metrics.json) under {', '.join(map(str, args.sweeps))}")
    rows = sorted((row(r, args.dev_beam) for r in runs), key=lambda r: -r["dev BLEU"])
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("| --- |" + " ---: |" * (len(cols) - 1))
    for r in rows:
        print("| " + " | ".join(f"`{r[c]}`" if c == "overrides" else f"{r[c]:,}" if isinstance(r[c], int) else str(r[c])
                                for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
