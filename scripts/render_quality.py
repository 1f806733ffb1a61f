"""Renderers for the quality records of the default corpus beyond the levers: the search's settings picked on dev
(docs/results/tune_search*.json), used by scripts/render_records.py (kept apart: that module is near the house's
300-line limit)."""

from __future__ import annotations

import json
from collections.abc import Callable

from render_peers import RECORDS, machine


def tune_search() -> str:
    """scripts/tune_search.py records: each run's dev and test BLEU and speed per setting, the dev-best marked."""
    out = []
    for path in sorted(RECORDS.glob("tune_search*.json")):
        r = json.loads(path.read_text())
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}):", "",
                "| run | beam | alpha | stop | dev BLEU | test BLEU | dev sents/s | test sents/s |",
                "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
        for run in r["runs"]:
            for x in run["rows"]:
                b = "**" if x == run["dev_best"] else ""
                out.append(f"| `{run['run']}` | {x['beam']} | {x['alpha']:g} | {x['stop']} | {b}{x['dev_bleu']:.2f}{b} | "
                           f"{x['test_bleu']:.2f} | {x['dev_sents_per_s']:.0f} | {x['test_sents_per_s']:.0f} |")
        out += ["", "Bold: the setting with the best dev BLEU, picked by dev alone.", ""]
    return "\n".join(out)


QUALITY_RENDERERS: dict[str, Callable[[], str]] = {"tune_search": tune_search}
