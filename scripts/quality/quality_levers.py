"""The free quality levers on the default corpus as a record: tied embeddings, subword regularization, averaging.

    python scripts/quality/quality_levers.py --minutes 7 --seeds 42 --json docs/results/quality_levers_7min.json

Each variant trains the recipe (``+experiment=zh_en_local_p``, packaged Tatoeba) for ``--minutes`` per seed, one
after another (nothing else may run: the budget is wall time), or for ``--steps`` updates (a slow machine's budget,
which the machine's load does not change), and scores its best checkpoint on the test split at beam 5, as every run
does. The baseline (and any variant ``+keep5``) also keeps its last five validations (``trainer.keep_last=5``),
averaged by ``nmt.average`` into one more row. ``--ensemble N``: each variant's seeds, in groups of N, then decode as
one ensemble (a budget spent on N smaller runs). The record (date, commit, command, CPU) is rewritten after every run.
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

VARIANTS = {"baseline": ["trainer.keep_last=5"], "keep5": ["trainer.keep_last=5"], "tied": ["model.tie_embeddings=decoder"],
            "sampling": ["tokenizer.sample_alpha=0.1"], "sampling05": ["tokenizer.sample_alpha=0.5"],
            "batch1400": ["trainer.batch_tokens=1400"],  # twice the recipe's batch (400 did worse than 700)
            "sents64": ["trainer.batch_sentences=64", "trainer.batch_tokens=100000"],  # the peers' batches (gap ablation)
            # the recipe's own settings moved where its sweep stopped (lr 0.005 beat 0.003; ls 0.1 beat 0; 0.3 tied 0.2)
            "lr008": ["trainer.lr=0.008"], "ls02": ["trainer.label_smoothing=0.2"], "dropout02": ["model.dropout=0.2"],
            # vocabulary sizes (the recipe: 4,000 a side) and the decoder's size (the recipe: 256)
            # (the Chinese side needs about 2,900 pieces for its characters at the default coverage)
            "tgt2k": ["tokenizer.tgt_vocab_size=2000"], "tgt1k": ["tokenizer.tgt_vocab_size=1000"],
            "tgt3k": ["tokenizer.tgt_vocab_size=3000"], "src8k": ["tokenizer.src_vocab_size=8000"],
            "src3k": ["tokenizer.src_vocab_size=3000"], "hid512": ["model.hidden_size=512"],
            # between the two sizes; wider embeddings alone; more dropout for the wider decoder
            "hid384": ["model.hidden_size=384"], "emb512": ["model.emb_size=512"], "emb384": ["model.emb_size=384"],
            "dropout04": ["model.dropout=0.4"],
            # fewer layers: more updates in a short budget
            "enc1": ["model.encoder_layers=1"], "dec1": ["model.decoder_layers=1"],
            # issue 60: regularization for a small corpus, more data (HSK's 3,770 train pairs at 0.15: about one pass of
            # each corpus a mix epoch, Tatoeba 26,153), the schedule
            "wdrop": ["trainer.src_word_dropout=0.1", "trainer.tgt_word_dropout=0.1"],
            "swdrop": ["trainer.src_word_dropout=0.1"],
            "wdrop02": ["trainer.src_word_dropout=0.2", "trainer.tgt_word_dropout=0.2"],
            "hsk": ["data.mix=[{source: hsk, weight: 0.15}]"], "warm400": ["trainer.warmup_steps=400"],
            "adamw": ["trainer.optimizer=adamw", "trainer.weight_decay=0.01"], "lr003": ["trainer.lr=0.003"]}


def run(cmd: list[str], log: Path) -> bool:
    """Run ``cmd`` with its output in ``log``; False if it failed (the rest of the sitting goes on)."""
    print("$", " ".join(cmd), flush=True)
    with open(log, "w") as out:
        code = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    if code:
        print(f"failed (exit {code}): {log}", flush=True)
    return code == 0


def overrides_of(name: str) -> list[str]:
    """A variant's overrides; ``a+b`` combines variants a and b."""
    unknown = [part for part in name.split("+") if part not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    return [o for part in name.split("+") for o in VARIANTS[part]]


def run_dir(out: Path, recipe: str, name: str, seed: str, minutes: float, steps: int = 0) -> Path:
    """A run's folder under ``--out``, named by everything that tells runs apart: sittings of other recipes and
    budgets may share ``--out`` (an earlier name without the recipe made two recipes' runs collide)."""
    return out / f"{recipe}-{name}_s{seed}_{f'{steps}steps' if steps else f'{minutes:g}min'}"


def scored(checkpoints: list[Path], splits: tuple[str, ...]) -> dict:
    """The checkpoints (several: one ensemble, their log-probabilities averaged) scored on ``splits`` of their
    corpus at beam 5, as a run's own test evaluation: {split: nmt.translator.Scores}."""
    from nmt.data.corpus import load_corpus
    from nmt.translator import Translator

    t = Translator.load(checkpoints, "cpu")
    sets = load_corpus(t.config.data, need=splits, splits=splits)
    return {k: t.evaluate(list(sets[k]["src"]), [list(sets[k]["tgt"])], beam=5) for k in splits}


def averaged(folder: Path) -> dict:
    """The last five validations' weights averaged, scored on the test split at beam 5."""
    avg = folder / "checkpoints" / "avg_last5.pt"
    if not run([sys.executable, "-m", "nmt.average", "--run", str(folder), "--last", "5", "--out", str(avg)],
               folder / "average.log"):
        return {"failed": str(folder / "average.log")}
    test = scored([avg], ("test",))["test"]
    return {"test_bleu": test.bleu, "test_chrf": test.chrf}


def finished(out: Path, overrides: list[str]) -> bool:
    """Whether ``out`` holds a finished run of exactly these overrides, for ``--reuse`` (a sitting cut short goes on
    where it stopped); a finished run of other overrides is refused by name."""
    if not (out / "metrics.json").is_file():
        return False
    ran = OmegaConf.to_container(OmegaConf.load(out / ".hydra" / "overrides.yaml"))
    wanted = [o for o in overrides if not o.startswith("hydra.")]  # Hydra keeps its own overrides in hydra.yaml
    if ran != wanted:
        raise SystemExit(f"--reuse: {out} ran {ran}, not {wanted}")
    return True


def ensembled(folders: list[Path]) -> dict:
    """The runs' best checkpoints decoding as one ensemble (``Translator.load`` of several: their log-probabilities
    averaged), scored on the dev and test splits at beam 5: what training the budget as n smaller runs buys."""
    s = scored([f / "checkpoints" / "best.pt" for f in folders], ("dev", "test"))
    return {"best_valid_bleu": s["dev"].bleu, "dev_beam": 5, "test_bleu": s["test"].bleu, "test_chrf": s["test"].chrf}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="zh_en_local_p")
    p.add_argument("--minutes", type=float, default=7.0)
    p.add_argument("--steps", type=int, default=0, help="a budget of updates instead of minutes (max_minutes=0)")
    p.add_argument("--seeds", default="42")
    p.add_argument("--variants", default="baseline,tied,sampling")
    p.add_argument("--out", type=Path, default=Path("/tmp/quality_levers"))
    p.add_argument("--json", type=Path)
    p.add_argument("--ensemble", type=int, default=0, metavar="N",
                   help="after the runs, each variant's seeds in groups of N (in --seeds order) decode as one ensemble: "
                        "a row with the group's updates summed (dev BLEU there is the ensemble's, at beam 5)")
    p.add_argument("--reuse", action="store_true", help="a run whose folder under --out holds a finished run of the same "
                                                         "overrides is read, not trained again")
    args = p.parse_args()
    seeds = args.seeds.split(",")
    if args.ensemble and (args.ensemble < 2 or len(seeds) % args.ensemble):
        raise SystemExit(f"--ensemble {args.ensemble}: needs groups of 2 or more that divide the {len(seeds)} seeds")
    rec = record({"recipe": args.recipe, "minutes": 0 if args.steps else args.minutes, "steps": args.steps, "rows": []})
    budget = ([f"trainer.max_steps={args.steps}", "trainer.max_minutes=0"] if args.steps
              else [f"trainer.max_minutes={args.minutes}"])
    for name in args.variants.split(","):
        overrides_of(name)  # a misspelt variant stops the sitting before its first run
    for seed in seeds:
        for name in args.variants.split(","):
            out = run_dir(args.out, args.recipe, name, seed, args.minutes, args.steps)
            out.parent.mkdir(parents=True, exist_ok=True)
            overrides = [f"+experiment={args.recipe}", *budget, f"trainer.seed={seed}",
                         *overrides_of(name), f"hydra.run.dir={out}"]
            reused = args.reuse and finished(out, overrides)
            if not reused and not run([sys.executable, "-m", "nmt.train", *overrides], out.parent / f"{out.name}.log"):
                rec["rows"].append({"variant": name, "seed": int(seed), "overrides": overrides,
                                    "failed": str(out.parent / f"{out.name}.log")})
                save(args.json, rec)
                continue
            m = json.loads((out / "metrics.json").read_text())
            row = {"variant": name, "seed": int(seed), "overrides": overrides, "steps": m["steps"],
                   "best_valid_bleu": m["best_valid_bleu"], "test_bleu": m["test_bleu"], "test_chrf": m["test_chrf"]}
            rec["rows"].append(row)
            if VARIANTS["keep5"][0] in overrides:  # the baseline, or any variant + keep5
                rec["rows"].append({**row, "variant": f"{name}+average5", **averaged(out)})
            print({k: v for k, v in row.items() if k != "overrides"}, flush=True)
            save(args.json, rec)
    for name in args.variants.split(",") if args.ensemble else []:
        for g in range(0, len(seeds), args.ensemble):
            group = seeds[g : g + args.ensemble]
            rows = [x for x in rec["rows"] if x["variant"] == name and str(x["seed"]) in group and "failed" not in x]
            if len(rows) < len(group):
                continue  # a member failed: its log is in the sitting's rows
            folders = [run_dir(args.out, args.recipe, name, seed, args.minutes, args.steps) for seed in group]
            row = {"variant": f"{name} ×{len(group)} ensembled", "seed": "+".join(group),
                   "steps": sum(x["steps"] for x in rows), **ensembled(folders)}
            rec["rows"].append(row)
            print(row, flush=True)
            save(args.json, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
