"""The docs hold together: the README is a short guide that opens with the two commands, every relative link in
README.md and docs/ reaches a file, and every rendered table equals what its records in docs/results/ give."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_the_readme_is_a_guide_that_starts_with_the_two_commands():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
    first_block = "\n".join(lines[: lines.index("```bash", 0) + 4])
    assert "make demo" in first_block and "make test" in first_block


def test_every_relative_link_reaches_a_file():
    broken = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target, _ in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_the_docs_tables_are_rendered_from_the_records():
    """Every ``<!-- render -->`` block in docs/ equals what scripts/records/render_records.py makes of docs/results/."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "records" / "render_records.py"), "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_ratio_to_the_fastest_peer_pairs_each_round_with_its_fastest_setting(monkeypatch):
    """scripts/records/render_peers.py: the peer setting of the highest median (not each round's luckiest pass) divides
    ours round by round; the median and range of those ratios."""
    monkeypatch.syspath_prepend(str(REPO))
    from scripts.records.render_peers import against_fastest

    def runs(*xs: float) -> list[dict]:
        return [{"sents_per_s": x, "bleu": 20.0} for x in xs]

    samples = {"default": {"ours": {"beam5_first_fp32": runs(400, 300, 600)}, "eole": {"beam5": runs(200, 100, 400)}},
               "tokens:8000": {"ours": {"beam5_first_fp32": runs(500, 500, 500)}, "eole": {"beam5": runs(150, 250, 150)}}}
    got = {x["batch"]: x for x in against_fastest({"samples": samples})}
    # Eole's default has the higher median (200 against 150): ours over it round by round
    assert [(x["peer"], x["peer_batch"], x["ratio"], x["range"]) for x in got.values()] == [
        ("eole", "default", 2.0, (1.5, 3.0)), ("eole", "default", 2.5, (1.25, 5.0))]
    assert (got["default"]["ours"], got["default"]["theirs"]) == (400, 200)


def test_a_record_that_carries_what_it_shows_renders_it(monkeypatch):
    """scripts/records/render_records.py: a record's ``shown`` parts (paragraph, list, table) as the docs write them."""
    monkeypatch.syspath_prepend(str(REPO))
    from scripts.records.render_records import part

    assert part("one " * 30) == "one " * 24 + "one\n" + ("one " * 5).strip()
    assert part({"items": ["a", "b"]}) == "- a\n- b"
    assert part({"columns": ["x", "y"], "align": "lr", "rows": [["1", ""]]}) == "| x | y |\n| --- | ---: |\n| 1 | |"
