"""Renderers for the decoding-speed records beside the peers (docs/results/decode_side_by_side*.json), used by
scripts/render_records.py (kept apart: that module is at the house's 300-line limit)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[1] / "docs" / "results"


def decode_side_by_side() -> str:
    """scripts/decode_side_by_side.py records: ours and Eole's sentences/s on the same test set, medians and ratios."""
    out = []
    for path in sorted(RECORDS.glob("decode_side_by_side*.json")):
        r = json.loads(path.read_text())
        cpu = r["cpu"]
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {cpu['model']}, {cpu['cores']} cores, flags "
                f"{' '.join(cpu['flags']) or 'none of amx/avx512'}; {r['threads']} threads; medians of {r['rounds']} "
                "alternating rounds):", "",
                "| batch | search | ours | ours sents/s | Eole sents/s (fp32) | ratio | BLEU ours / Eole |",
                "| --- | --- | --- | ---: | ---: | ---: | --- |"]
        out += [f"| {x['batch']} | {x['search']} | {x['precision']} | {x['ours_sents_per_s']:,.0f} | "
                f"{x['eole_sents_per_s']:,.0f} | {x['ratio']:.2f}× | {x['ours_bleu']:.2f} / {x['eole_bleu']:.2f} |"
                for x in r["rows"]]
        out.append("")
    return "\n".join(out)


SPEED: dict[str, Callable[[], str]] = {"decode_side_by_side": decode_side_by_side}
