"""The house's targets (docs/code_map.md), measured by scripts/checks/house.py on the tree as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "checks"))

import house  # noqa: E402


def test_modules_functions_and_the_paper_path_meet_the_targets():
    """No module over 300 lines, no function over 60 (beam search 100), decoder.py within 150, the paper's modules
    import only each other and the ground, and, counting every import, no circle and no import from a lower floor
    to a higher one."""
    assert house.missed(house.measure()) == []


def test_at_most_two_private_api_uses_each_justified_where_used():
    modules = house.measure()
    uses = [(rel, u) for rel, m in modules.items() for u in m["private"]]
    assert len(uses) <= 2, uses
    for rel, use in uses:
        line = int(use.rsplit("line ", 1)[1].rstrip(")"))
        around = (ROOT / rel).read_text().splitlines()[max(0, line - 4) : line]
        assert any("Private" in s or "private" in s for s in around), f"{rel}: {use} says not why"


def test_the_measures_see_what_they_claim(tmp_path):
    """A long function, a private reach, an autograd.Function import in a paper module, a paper module importing
    beyond the ground, an import circle through a function-level import and a TYPE_CHECKING one, and an import from
    a lower floor up are each caught."""
    (tmp_path / "nmt" / "engine").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "nmt" / "engine" / "deferred.py").write_text("import torch\nclass F(torch.autograd.Function):\n    pass\n")
    long = f"def long():\n{body}\n    return ds._indices\n"
    (tmp_path / "nmt" / "decoder.py").write_text(f"from nmt.engine.deferred import F\n{long}")
    (tmp_path / "nmt" / "attention.py").write_text("def f():\n    from nmt import tokenizer\n")  # function level
    (tmp_path / "nmt" / "tokenizer.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                   "    from nmt.attention import X\n")
    (tmp_path / "nmt" / "vocab.py").write_text("from nmt.search import beam_search\n")  # ground -> search: up
    (tmp_path / "nmt" / "search.py").write_text("from . import vocab\n")  # relative, resolved
    (tmp_path / "nmt" / "model.py").write_text("")
    modules = house.measure(tmp_path)
    problems = house.missed(modules)
    assert any("long is 63 lines" in p for p in problems)
    assert any("nmt/decoder.py imports nmt.engine.deferred, which defines an autograd.Function" in p for p in problems)
    assert any(p.startswith("nmt/attention.py imports nmt.tokenizer: the paper's files") for p in problems)
    assert "import circle: nmt.attention <-> nmt.tokenizer" in problems
    assert "import circle: nmt.search <-> nmt.vocab" in problems
    assert "upward import: nmt.vocab -> nmt.search (ground -> search)" in problems
    assert modules["nmt/decoder.py"]["private"] == ["ds._indices (line 64)"]


def test_the_script_prints_the_table_and_checks():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "checks" / "house.py"), "--check"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "nmt/decoder.py" in out.stdout and "targets:\n  all met" in out.stdout
