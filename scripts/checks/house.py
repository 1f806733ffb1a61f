"""The house's measures of nmt/: lines per module, the longest function, private names reached across
objects, and which modules define an ``autograd.Function``; ``--json`` writes them as a record.

    python scripts/checks/house.py                  # the table
    python scripts/checks/house.py --check          # exit 1 if a target of docs/code_map.md is missed
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository root: scripts.*
from scripts.records.record import record, save  # noqa: E402

PAPER = ("nmt/attention.py", "nmt/decoder.py", "nmt/model.py")  # the equations: no speed machinery imported
MAX_MODULE, MAX_FUNCTION, MAX_SEARCH, MAX_DECODER = 300, 60, 100, 150
SEARCH = {("nmt/search.py", "beam_search")}  # the one function allowed MAX_SEARCH lines


def functions(tree: ast.AST) -> list[tuple[str, int]]:
    """(name, lines) of every function and method, decorators included."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((node.name, node.end_lineno - first + 1))
    return out


def private_uses(tree: ast.AST) -> list[str]:
    """``obj._name`` where obj is not self/cls and the name is not a dunder: another object's private part."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            public = node.attr in ("_replace", "_asdict", "_fields", "_make")  # namedtuple's documented methods
            if not public and not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
                out.append(f"{ast.unparse(node)} (line {node.lineno})")
    return out


def defines_autograd_function(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.ClassDef) and any(ast.unparse(b).endswith("autograd.Function") for b in n.bases)
               for n in ast.walk(tree))


def imported_modules(tree: ast.AST) -> set[str]:
    """Modules imported at the top level of a module (not inside functions)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def measure(root: Path = ROOT) -> dict:
    modules = {}
    for path in sorted((root / "nmt").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), rel)
        fns = functions(tree)
        longest = max(fns, key=lambda f: f[1], default=("-", 0))
        modules[rel] = {"lines": len(path.read_text().splitlines()), "longest_function": longest[0],
                        "longest_lines": longest[1], "functions": fns, "private": private_uses(tree),
                        "autograd_function": defines_autograd_function(tree), "imports": sorted(imported_modules(tree))}
    return modules


def missed(modules: dict) -> list[str]:
    """The targets (docs/code_map.md) each module misses, one line each."""
    out = []
    machinery = {m[:-3].replace("/", ".") for m, v in modules.items() if v["autograd_function"]}
    for rel, m in modules.items():
        if m["lines"] > MAX_MODULE:
            out.append(f"{rel}: {m['lines']} lines (at most {MAX_MODULE})")
        for name, n in m["functions"]:
            limit = MAX_SEARCH if (rel, name) in SEARCH else MAX_FUNCTION
            if n > limit:
                out.append(f"{rel}: {name} is {n} lines (at most {limit})")
        if rel in PAPER and machinery & set(m["imports"]):
            out.append(f"{rel} imports {', '.join(sorted(machinery & set(m['imports'])))}, which defines an autograd.Function")
    if modules["nmt/decoder.py"]["lines"] > MAX_DECODER:
        out.append(f"nmt/decoder.py: {modules['nmt/decoder.py']['lines']} lines (at most {MAX_DECODER})")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    p.add_argument("--json", type=Path, help="also write the table as a JSON record here")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    args = p.parse_args()
    modules = measure(args.root)
    print(f"{'module':32} {'lines':>5}  longest function")
    for rel, m in modules.items():
        print(f"{rel:32} {m['lines']:5}  {m['longest_function']} ({m['longest_lines']})")
    private = [f"{rel}: {u}" for rel, m in modules.items() for u in m["private"]]
    print(f"\nprivate names reached across objects ({len(private)}):", *private, sep="\n  ")
    print("\nmodules defining an autograd.Function:", ", ".join(r for r, m in modules.items() if m["autograd_function"]))
    save(args.json, record({"modules": {rel: {k: v for k, v in m.items() if k != "functions"} for rel, m in modules.items()}}))
    problems = missed(modules)
    print("\ntargets:", "all met" if not problems else "", *problems, sep="\n  ")
    if args.check and problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
