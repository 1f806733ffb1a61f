"""The house's measures of nmt/: lines per module, the longest function, private names reached across
objects, which modules define an ``autograd.Function``, and the import graph counting every import (function-level
and ``TYPE_CHECKING`` ones too): its circles and the imports that run from a lower floor up to a higher one
(``FLOORS``); ``--json`` writes them as a record.

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

PAPER = ("nmt/encoder.py", "nmt/attention.py", "nmt/decoder.py", "nmt/model.py")  # the equations
PAPER_MAY_IMPORT = {"nmt.encoder", "nmt.attention", "nmt.decoder", "nmt.model", "nmt.config", "nmt.vocab", "nmt.tied"}
# the floors, bottom up (docs/code_map.md's diagram): a module imports only from its floor and those below;
# a module named nowhere is on the ground floor
FLOORS = [
    ("ground", ()),
    ("paper model", ("nmt.encoder", "nmt.attention", "nmt.decoder", "nmt.model")),
    ("fast engine", ("nmt.engine",)),
    ("built model", ("nmt.build", "nmt.checkpoint", "nmt.int8")),
    ("search", ("nmt.stepper", "nmt.search")),
    ("translator", ("nmt.decode", "nmt.translator", "nmt.export_onnx", "nmt.onnx_runtime")),
    ("training and the commands' parts", ("nmt.update", "nmt.precision", "nmt.validation", "nmt.run_folder",
                                          "nmt.init_from", "nmt.cli")),
    ("entry points", ("nmt.train", "nmt.evaluate", "nmt.translate", "nmt.export", "nmt.serve", "nmt.average")),
    ("the package's face", ("nmt",)),
]
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


def module_name(rel: str) -> str:
    """``nmt/engine/cell.py`` -> ``nmt.engine.cell``; a package's ``__init__.py`` -> the package."""
    name = rel[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def imported_modules(tree: ast.AST, name: str = "", package: bool = False) -> set[str]:
    """Every name a module imports, at every level (inside functions and ``if TYPE_CHECKING`` too); relative
    imports resolved against ``name`` (the module's own dotted name, ``package`` if it is an ``__init__``)."""
    out = set()
    parts = name.split(".") if package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base:  # the names imported: a module, or a name of the module ``base`` (import_graph tells which)
                out |= {f"{base}.{a.name}" for a in node.names}
    return out


def floor(module: str) -> int:
    """The floor of a module (``FLOORS``): the one naming it or a package above it (the root ``nmt`` only itself)."""
    found = 0
    for i, (_, names) in enumerate(FLOORS):
        if module in names or any(module.startswith(n + ".") for n in names if n != "nmt"):
            found = i
    return found


def import_graph(modules: dict) -> dict[str, set[str]]:
    """nmt module -> the nmt modules it imports (a name imported from a module counts as that module)."""
    names = {module_name(rel) for rel in modules}

    def owner(imported: str) -> str:
        while imported not in names and "." in imported:
            imported = imported.rsplit(".", 1)[0]
        return imported

    return {module_name(rel): {owner(i) for i in m["imports"] if i == "nmt" or i.startswith("nmt.")} - {module_name(rel)}
            for rel, m in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's strongly connected components of two modules or more (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower floor to a higher one, each as 'a -> b (floor -> floor)'."""
    return [f"{a} -> {b} ({FLOORS[floor(a)][0]} -> {FLOORS[floor(b)][0]})" for a in sorted(graph)
            for b in sorted(graph[a]) if floor(b) > floor(a)]


def measure(root: Path = ROOT) -> dict:
    modules = {}
    for path in sorted((root / "nmt").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), rel)
        fns = functions(tree)
        longest = max(fns, key=lambda f: f[1], default=("-", 0))
        modules[rel] = {"lines": len(path.read_text().splitlines()), "longest_function": longest[0],
                        "longest_lines": longest[1], "functions": fns, "private": private_uses(tree),
                        "autograd_function": defines_autograd_function(tree),
                        "imports": sorted(imported_modules(tree, module_name(rel), path.name == "__init__.py"))}
    return modules


def missed(modules: dict) -> list[str]:
    """The targets (docs/code_map.md) each module misses, one line each."""
    out = []
    machinery = {module_name(m) for m, v in modules.items() if v["autograd_function"]}
    graph = import_graph(modules)
    for rel, m in modules.items():
        if m["lines"] > MAX_MODULE:
            out.append(f"{rel}: {m['lines']} lines (at most {MAX_MODULE})")
        for name, n in m["functions"]:
            limit = MAX_SEARCH if (rel, name) in SEARCH else MAX_FUNCTION
            if n > limit:
                out.append(f"{rel}: {name} is {n} lines (at most {limit})")
        if rel in PAPER and (uses := machinery & graph[module_name(rel)]):
            out.append(f"{rel} imports {', '.join(sorted(uses))}, which defines an autograd.Function")
    for rel in PAPER:
        if rel in modules and (beyond := graph[module_name(rel)] - PAPER_MAY_IMPORT):
            out.append(f"{rel} imports {', '.join(sorted(beyond))}: the paper's files import only each other and the ground")
    out += [f"import circle: {' <-> '.join(c)}" for c in circles(graph)]
    out += [f"upward import: {u}" for u in upward(graph)]
    if "nmt/decoder.py" in modules and modules["nmt/decoder.py"]["lines"] > MAX_DECODER:
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
    graph = import_graph(modules)
    print(f"\nimports between nmt's modules, every level counted: {sum(map(len, graph.values()))}; "
          f"circles: {len(circles(graph))}; upward: {len(upward(graph))}")
    save(args.json, record({"modules": {rel: {k: v for k, v in m.items() if k != "functions"} for rel, m in modules.items()}}))
    problems = missed(modules)
    print("\ntargets:", "all met" if not problems else "", *problems, sep="\n  ")
    if args.check and problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
