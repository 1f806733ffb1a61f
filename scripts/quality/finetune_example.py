"""The fine-tuning example as a record: a Tatoeba model on HSK before, after fine-tuning, and HSK from scratch.

    python scripts/quality/finetune_example.py --base outputs/tatoeba --minutes 5 --json docs/results/finetune_hsk.json

1. before: the trained model (``--base``, a run folder) translates the HSK test split as it is (beam 5);
2. fine-tuned: ``nmt.train +experiment=RECIPE data=hsk trainer.init_from=BASE trainer.lr=0.001`` for ``--minutes``;
3. from scratch: the same command without ``init_from`` (a tokenizer of its own, trained on HSK), same minutes.
Both runs score their best checkpoint on the HSK test split at beam 5, as every run does; the record (date,
commit, command, CPU) holds each BLEU and chrF, the updates each run made, and the base model's own figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402


def train(out: Path, recipe: str, minutes: float, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "nmt.train", f"+experiment={recipe}", "data=hsk", f"trainer.max_minutes={minutes}",
           f"hydra.run.dir={out}", *extra]
    print("$", " ".join(cmd), flush=True)
    with open(out.parent / f"{out.name}.log", "w") as log:
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=log, stderr=subprocess.STDOUT)
    m = json.loads((out / "metrics.json").read_text())
    return {k: m[k] for k in ("steps", "train_seconds", "best_valid_bleu", "test_bleu", "test_chrf")} | {"command": cmd}


def before(base: Path, tuned: Path) -> dict:
    """The base model on the HSK test split that the fine-tuned run scored (its resolved data config)."""
    from nmt.data.corpus import load_corpus
    from nmt.translator import Translator

    data = OmegaConf.load(tuned / ".hydra" / "config.yaml").data
    test = load_corpus(data, need=("test",), splits=("test",))["test"]
    s = Translator.load(base, "cpu").evaluate(list(test["src"]), [list(test["tgt"])], beam=5)
    return {"test_bleu": s.bleu, "test_chrf": s.chrf, "sentences": len(test)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="a run folder trained on Tatoeba (the recipe's model)")
    p.add_argument("--recipe", default="zh_en_local_p")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--finetune-lr", type=float, default=0.001, help="the fine-tuning run's peak lr (the recipe's: 0.005)")
    p.add_argument("--out", type=Path, default=Path("/tmp/finetune_hsk"))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.base.resolve()
    rec = record({"recipe": args.recipe, "minutes": args.minutes, "base": str(base),
                  "base_metrics": {k: v for k, v in json.loads((base / "metrics.json").read_text()).items()
                                   if k in ("steps", "train_seconds", "test_bleu", "best_valid_bleu")}})
    rec["finetuned"] = train(args.out / "finetuned", args.recipe, args.minutes,
                                [f"trainer.init_from={base}", f"trainer.lr={args.finetune_lr}"])
    rec["before"] = before(base, args.out / "finetuned")
    rec["scratch"] = train(args.out / "scratch", args.recipe, args.minutes, [])
    for name in ("before", "finetuned", "scratch"):
        r = rec[name]
        print(f"{name:<10} HSK test BLEU {r['test_bleu']:.2f} chrF {r['test_chrf']:.2f}"
              + (f" after {r['steps']} updates" if "steps" in r else ""))
    save(args.json, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
