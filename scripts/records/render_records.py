"""Render the docs' tables from the measurement records in docs/results/ (figures are data, not prose).

    python scripts/records/render_records.py            # rewrite every <!-- render: NAME --> ... <!-- /render --> block
    python scripts/records/render_records.py --check    # exit 1 if a block differs from what its records give

A block's NAME picks a renderer; each reads the records (JSON written by a script in the tree through
scripts/records/record.py, with date, commit, command and machine) and returns Markdown. The blocks live in
README.md and docs/*.md. A record that carries what it shows (figures transcribed from older docs, a finished
study's summary) names its blocks itself: ``"shown": {NAME: [part, ...]}``, each part a paragraph (a string), a
list (``{"items": [...]}``) or a table (``{"columns": [...], "align": "lrr", "rows": [[...], ...]}``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: scripts.*
from scripts.records.render_peers import PEERS_RENDERERS  # noqa: E402
from scripts.records.render_quality import QUALITY_RENDERERS  # noqa: E402
from scripts.records.render_speed import SPEED_RENDERERS  # noqa: E402

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- render: (\w+) -->\n)(.*?)(<!-- /render -->)", re.S)


def wrap(text: str, bullet: bool = False) -> str:
    """A paragraph (or a list item) wrapped as the docs wrap theirs."""
    return textwrap.fill(text, 100, initial_indent="- " if bullet else "", subsequent_indent="  " if bullet else "",
                         break_long_words=False, break_on_hyphens=False)


def part(p: str | dict) -> str:
    """One part of a record's ``shown`` block as Markdown: a paragraph, a list or a table."""
    if isinstance(p, str):
        return wrap(p)
    if "items" in p:
        return "\n".join(wrap(x, True) for x in p["items"])
    align = "| " + " | ".join("---:" if a == "r" else "---" for a in p["align"]) + " |"
    return "\n".join([row(p["columns"]), align, *(row(cells) for cells in p["rows"])])


def row(cells: list[str]) -> str:
    """A table row (an empty string: an empty cell)."""
    return "|" + "".join(f" {c} |" if c else " |" for c in cells)


def shown() -> dict[str, Callable[[], str]]:
    """A renderer for every block that a record in docs/results/ carries under ``shown``."""
    out = {}
    for path in sorted((REPO / "docs" / "results").glob("*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        for name, parts in (r.get("shown", {}) if isinstance(r, dict) else {}).items():
            out[name] = lambda parts=parts: "\n\n".join(part(p) for p in parts) + "\n"
    return out


RENDERERS: dict[str, Callable[[], str]] = {**SPEED_RENDERERS, **PEERS_RENDERERS, **QUALITY_RENDERERS, **shown()}


def render(text: str, where: Path) -> str:
    """``text`` with every block rendered afresh; an unknown renderer's name ends the run."""

    def one(m: re.Match) -> str:
        if m.group(2) not in RENDERERS:
            raise SystemExit(f"{where}: no renderer {m.group(2)!r} (known: {', '.join(RENDERERS)})")
        return m.group(1) + RENDERERS[m.group(2)]() + m.group(4)

    return BLOCK.sub(one, text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a doc is out of date")
    args = p.parse_args()
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = render(text, doc)
        if new != text:
            stale.append(doc)
            if not args.check:
                doc.write_text(new, encoding="utf-8")
    for doc in stale:
        print(f"{doc.relative_to(REPO)}: {'out of date with docs/results' if args.check else 'rendered'}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
