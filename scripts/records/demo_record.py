"""``make demo``'s record: what the demo's run made of the packaged corpus, which the README's demo block shows.

    python scripts/records/demo_record.py RUN [--out docs/results]      # make demo runs it after training

Reads RUN's metrics.json (updates, target tokens/s, peak memory, best dev BLEU), run_info.json (the training
command), .hydra/config.yaml (the budget, the precision, the validation beam), evaluate_test.json (``python -m
nmt.evaluate RUN --split test --beam 5 --json``) and translations.tsv (``python -m nmt.translate RUN --beam 5
--with-source ...``); prints the figures as the README shows them and writes OUT/demo_<date>.json with the date,
commit, command, CPU model and flags (scripts/records/record.py). The README's block shows the newest such record
that git tracks: commit one to show it (``python scripts/records/render_records.py`` renders the block).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

TEST = ("sentences", "references", "beam", "bleu", "chrf", "sentences_per_s", "bleu_signature", "chrf_signature")


def figures(run: Path, evaluation: Path, translations: Path) -> dict:
    """What the demo measured, from the run folder and the two outputs."""
    metrics = json.loads((run / "metrics.json").read_text())
    trainer = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())["trainer"]
    test = json.loads(evaluation.read_text())
    pairs = [line.split("\t", 1) for line in translations.read_text(encoding="utf-8").splitlines() if "\t" in line]
    return {"run": str(run), "train_command": json.loads((run / "run_info.json").read_text())["argv"],
            "max_minutes": trainer["max_minutes"], "precision": metrics["precision"], "updates": metrics["steps"],
            "train_seconds": metrics["train_seconds"], "tgt_tok_per_s": metrics["train_tgt_tok_per_s"],
            "peak_memory_mb": metrics["peak_memory_mb"], "best_dev_bleu": metrics["best_valid_bleu"],
            "valid_beam": trainer["valid_beam"], "test": {k: test[k] for k in TEST}, "translations": pairs}


def text(r: dict) -> str:
    """A demo record as the README shows it: where and what training made, then the test split and the sentences."""
    cpu, t = r["cpu"], r["test"]
    search = "greedy" if r["valid_beam"] <= 1 else f"beam {r['valid_beam']}"
    lines = [f"{'set':<4}  {'sents':>6}  {'refs':>4}  {'BLEU':>6}  {'chrF':>6}  {'sent/s':>7}",  # as nmt.evaluate prints
             f"test  {t['sentences']:>6}  {t['references']:>4}  {t['bleu']:>6.2f}  {t['chrf']:>6.2f}  "
             f"{t['sentences_per_s']:>7.1f}",
             f"BLEU: {t['bleu_signature']}", f"chrF: {t['chrf_signature']}", *("\t".join(p) for p in r["translations"])]
    return (f"What `make demo` printed on {r['date'][:10]} at {r['commit'][:7]}{' with changes' if r['dirty'] else ''} "
            f"({cpu['model']}, {cpu['cores']} cores, CPU flags `{' '.join(cpu['flags']) or 'none of amx/avx512'}`"
            f"{', GPU ' + r['gpu'] if r['gpu'] else ''}; {r['precision']}): {r['updates']:,} updates in the "
            f"{r['max_minutes']:g}-minute budget at {r['tgt_tok_per_s']:,.0f} target tokens/s, peak "
            f"{r['peak_memory_mb']:,.0f} MB, best dev BLEU {r['best_dev_bleu']:.2f} ({search}), then\n\n"
            "```\n" + "\n".join(lines) + "\n```\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="the demo's run folder (make demo: outputs/demo)")
    p.add_argument("--evaluation", type=Path, help="nmt.evaluate's --json output (default RUN/evaluate_test.json)")
    p.add_argument("--translations", type=Path, help="nmt.translate's --with-source output (default RUN/translations.tsv)")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "docs" / "results")
    args = p.parse_args(argv)
    rec = record(figures(args.run, args.evaluation or args.run / "evaluate_test.json",
                         args.translations or args.run / "translations.tsv"), argv)
    path, n = args.out / f"demo_{datetime.date.today().isoformat()}.json", 1
    while path.exists():  # a second demo the same day keeps the first
        n += 1
        path = path.with_name(f"demo_{datetime.date.today().isoformat()}_{n}.json")
    save(path, rec)
    print(text(rec) + f"\nrecord: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
