"""Renderers for the quality records of the default corpus beyond the levers: the search's settings picked on dev
(docs/results/tune_search*.json), used by scripts/records/render_records.py (kept apart: that module is near the house's
300-line limit)."""

from __future__ import annotations

import json
from collections.abc import Callable

from render_peers import RECORDS, machine


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


QUALITY_RENDERERS: dict[str, Callable[[], str]] = {"tune_search": tune_search}
