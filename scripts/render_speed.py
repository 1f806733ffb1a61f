"""Renderers for the decoding-speed records beside the peers (docs/results/peer_decode*.json), used by
scripts/render_records.py (kept apart: that module is at the house's 300-line limit)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

RECORDS = Path(__file__).resolve().parents[1] / "docs" / "results"


def machine(cpu: dict) -> str:
    """A record's CPU as the tables name it: model, cores, the AMX/AVX-512 flags."""
    return f"{cpu['model']}, {cpu['cores']} cores, flags {' '.join(cpu['flags']) or 'none of amx/avx512'}"


PEERS = {"eole": "Eole", "onmt": "OpenNMT-py"}


def decode_side_by_side() -> str:
    """scripts/decode_side_by_side.py records: ours and the peers' sentences/s on the same test set, medians, ratios."""
    out = []
    for path in sorted(RECORDS.glob("peer_decode*.json")):
        r = json.loads(path.read_text())
        out += [f"`{path.name}` ({r['date'][:10]}, {r['commit'][:7]}; {machine(r['cpu'])}; {r['threads']} threads; "
                f"medians of {r['rounds']} alternating rounds):", "",
                "| peer | batch | search | ours | ours sents/s | peer sents/s (fp32) | ratio | BLEU ours / peer |",
                "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
        for x in r["rows"]:  # records before OpenNMT-py joined hold Eole alone, under eole_* keys
            peer, theirs = x.get("peer", "eole"), x.get("peer_sents_per_s", x.get("eole_sents_per_s"))
            out.append(f"| {PEERS[peer]} | {x['batch']} | {x['search']} | {x['precision']} | {x['ours_sents_per_s']:,.0f} | "
                       f"{theirs:,.0f} | {x['ratio']:.2f}× | {x['ours_bleu']:.2f} / "
                       f"{x.get('peer_bleu', x.get('eole_bleu')):.2f} |")
        out.append("")
    return "\n".join(out)


SPEED: dict[str, Callable[[], str]] = {"decode_side_by_side": decode_side_by_side}
