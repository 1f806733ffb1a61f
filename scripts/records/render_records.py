"""Render the docs' tables from the measurement records in docs/results/ (figures are data, not prose).

    python scripts/records/render_records.py            # rewrite every <!-- render: NAME --> ... <!-- /render --> block
    python scripts/records/render_records.py --check    # exit 1 if a block differs from what its records give

A block's NAME picks a renderer; each reads the records (JSON written by a script in the tree through
scripts/records/record.py, with date, commit, command and machine) and returns Markdown. The blocks live in
README.md and docs/*.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: scripts.*
from scripts.records.render_history import HISTORY  # noqa: E402
from scripts.records.render_peers import PEERS_RENDERERS  # noqa: E402
from scripts.records.render_quality import QUALITY_RENDERERS  # noqa: E402
from scripts.records.render_serving import SERVING_HISTORY  # noqa: E402
from scripts.records.render_speed import SPEED_RENDERERS  # noqa: E402

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- render: (\w+) -->\n)(.*?)(<!-- /render -->)", re.S)
RENDERERS: dict[str, Callable[[], str]] = {**SPEED_RENDERERS, **PEERS_RENDERERS, **QUALITY_RENDERERS, **HISTORY,
                                           **SERVING_HISTORY}


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
