"""Renderers of quality records on the default corpus: the search's settings picked on dev (docs/results/
tune_search*.json), the quality levers (quality_levers*.json), fine-tuning (finetune_*.json) and ``make demo``'s
record for the README (demo_*.json, those git tracks), used by scripts/records/render_records.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Optional

from scripts.records.demo_record import text
from scripts.records.render_peers import RECORDS, machine


def tune_search() -> str:
    """scripts/quality/tune_search.py records: each run's dev and test BLEU and speed per setting, the dev-best marked (a
    record of ``full`` against ``first`` alone: one line a run, ``stop_pairs``)."""
    out = []
    for path in sorted(RECORDS.glob("tune_search*.json")):
        r = json.loads(path.read_text())
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}):", ""]
        if all(sorted(x["stop"] for x in run["rows"]) == ["first", "full"] for run in r["runs"]):
            out += stop_pairs(r["runs"])
            continue
        out += ["| run | beam | alpha | stop | dev BLEU | test BLEU | dev sents/s | test sents/s |",
                "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
        for run in r["runs"]:
            for x in run["rows"]:
                b = "**" if x == run["dev_best"] else ""
                out.append(f"| `{run['run']}` | {x['beam']} | {x['alpha']:g} | {x['stop']} | {b}{x['dev_bleu']:.2f}{b} | "
                           f"{x['test_bleu']:.2f} | {x['dev_sents_per_s']:.0f} | {x['test_sents_per_s']:.0f} |")
        out += ["", "Bold: the setting with the best dev BLEU, picked by dev alone.", ""]
    return "\n".join(out)


def stop_pairs(runs: list[dict]) -> list[str]:
    """A record that decodes each run with ``stop=full`` and ``first`` only: one line a run, their differences and
    the mean of each difference."""
    out = ["| run | beam, alpha | dev BLEU full / first | test BLEU full / first | first − full: dev | test | "
           "test sents/s full / first |", "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    diffs = []
    for run in runs:
        f, g = (next(x for x in run["rows"] if x["stop"] == s) for s in ("full", "first"))
        diffs.append((g["dev_bleu"] - f["dev_bleu"], g["test_bleu"] - f["test_bleu"],
                      g["test_sents_per_s"] / f["test_sents_per_s"]))
        out.append(f"| `{run['run']}` | {f['beam']}, {f['alpha']:g} | {f['dev_bleu']:.2f} / {g['dev_bleu']:.2f} | "
                   f"{f['test_bleu']:.2f} / {g['test_bleu']:.2f} | {diffs[-1][0]:+.2f} | {diffs[-1][1]:+.2f} | "
                   f"{f['test_sents_per_s']:.0f} / {g['test_sents_per_s']:.0f} ({diffs[-1][2]:.2f}×) |")
    mean = [sum(d[i] for d in diffs) / len(diffs) for i in range(3)]
    better = sum(d[1] > 0 for d in diffs)
    out += [f"| mean of {len(diffs)} ({better} with a higher test BLEU under `first`) | | | | {mean[0]:+.2f} | "
            f"{mean[1]:+.2f} | ({mean[2]:.2f}×) |", ""]
    return out


def finetune() -> str:
    """scripts/quality/finetune_example.py records (the script retired, its records kept): a trained model on a new
    corpus before, fine-tuned, and from scratch."""
    out = []
    for path in sorted(RECORDS.glob("finetune_*.json")):
        r = json.loads(path.read_text())
        b = r["base_metrics"]
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; base: the {r['recipe']} "
                f"model after {b['steps']:,} updates, Tatoeba test BLEU {b['test_bleu']:.2f}):", "",
                "| model | HSK test BLEU (beam 5) | chrF | updates on HSK |", "| --- | ---: | ---: | ---: |",
                f"| base, as it is | {r['before']['test_bleu']:.2f} | {r['before']['test_chrf']:.2f} | 0 |"]
        for name, label in (("finetuned", f"fine-tuned {r['minutes']:g} min"), ("scratch", f"from scratch {r['minutes']:g} min")):
            x = r[name]
            out.append(f"| {label} | {x['test_bleu']:.2f} | {x['test_chrf']:.2f} | {x['steps']:,} |")
        out.append("")
    return "\n".join(out)


def _minus(value: float, base: Optional[float]) -> str:
    return "" if base is None else f"{value - base:+.2f}"


def _beam(row: dict) -> str:
    """A dev BLEU's search where it is not validation's greedy one (an ensemble's row: beam 5)."""
    return f" (beam {row['dev_beam']})" if row.get("dev_beam") else ""


def quality_levers() -> str:
    """scripts/quality/quality_levers.py records: a recipe with one lever pulled at a time, per seed; each row against
    its seed's baseline in the same sitting, or for a budget of updates in another sitting of that recipe and budget."""
    records = [(path, json.loads(path.read_text())) for path in sorted(RECORDS.glob("quality_levers*.json"))]

    def budget(r: dict) -> str:
        return f"{r['steps']:,} updates a run" if r.get("steps") else f"{r['minutes']:g} minutes a run"

    def baselines(r: dict) -> dict:
        return {x["seed"]: x["test_bleu"] for x in r["rows"] if x["variant"] == "baseline" and "failed" not in x}

    # a budget of updates is the same on any machine: its baselines serve every sitting of that recipe and budget
    by_steps = {(r["recipe"], r["steps"], seed): bleu for _, r in records if r.get("steps")
                for seed, bleu in baselines(r).items()}
    out = []
    for path, r in records:
        base = baselines(r) or {seed: bleu for (recipe, steps, seed), bleu in by_steps.items()
                                if (recipe, steps) == (r["recipe"], r.get("steps"))}
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['recipe']}, "
                f"{budget(r)}):", "",
                "| variant | seed | updates | best dev BLEU | test BLEU (beam 5) | chrF | test − baseline |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        out += [f"| {x['variant']} | {x['seed']} | failed: see its log | | | | |" if "failed" in x else
                f"| {x['variant']} | {x['seed']} | {x['steps']:,} | {x['best_valid_bleu']:.2f}{_beam(x)} | "
                f"{x['test_bleu']:.2f} | {x['test_chrf']:.2f} | {_minus(x['test_bleu'], base.get(x['seed']))} |"
                for x in r["rows"]]
        out.append("")
    return "\n".join(out)


def demo() -> str:
    """README.md: the newest demo record that git tracks (an untracked one, a demo just run, waits for its commit)."""
    tracked = subprocess.run(["git", "ls-files", "--", "demo_*.json"], cwd=RECORDS, capture_output=True, text=True).stdout
    records = [json.loads((RECORDS / name).read_text()) for name in tracked.split()]
    if not records:
        return ("No record yet: `make demo` writes one (`docs/results/demo_<date>.json`), and this block shows it once "
                "committed.\n")
    return text(max(records, key=lambda r: r["date"]))

def by_length() -> str:
    """scripts/quality/by_length.py records: BLEU per source-length bucket, a row per run and split."""
    out = []
    for path in sorted(RECORDS.glob("by_length*.json")):
        r = json.loads(path.read_text())
        buckets = list(dict.fromkeys(b["bucket"] for run in r["runs"] for x in run["rows"] for b in x["by_length"]))
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; beam {r['beam']}), BLEU by "
                "source length in pieces (sentences in the bucket):", "",
                "| attention | updates | split | all | " + " | ".join(buckets) + " |",
                "| --- | ---: | --- | ---: |" + " ---: |" * len(buckets)]
        for run in r["runs"]:
            for x in run["rows"]:
                cells = {b["bucket"]: f"{b['bleu']:.2f} ({b['sentences']})" for b in x["by_length"]}
                out.append(f"| {run['score']}, {run['mode']} | {run['steps']:,} | {x['set']} | {x['bleu']:.2f} | "
                           + " | ".join(cells.get(b, "–") for b in buckets) + " |")
        out.append("")
    return "\n".join(out) if out else "No record yet: scripts/quality/by_length.py writes one.\n"


QUALITY_RENDERERS: dict[str, Callable[[], str]] = {"tune_search": tune_search, "quality_levers": quality_levers,
                                                   "finetune": finetune, "demo": demo, "by_length": by_length}
