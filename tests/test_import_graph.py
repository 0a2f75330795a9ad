"""No import circles in the project's packages (issue 16): a module that needs another which needs it back can only
work by importing lazily, and which one loads first then changes what either sees.

The graph counts every import of a module of ours, function-level ones included (a lazy import that closes a circle
is the same knot, only hidden), and leaves out `if TYPE_CHECKING:` blocks (never run).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "roofline", "widgets")

def _modules() -> dict[str, Path]:
    """Dotted name -> file for every module of the project's packages (and of studies/'s helper modules)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + sorted((ROOT / "studies").glob("*.py"))
    out = {}
    for path in files:
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported_names(path: Path, package: str) -> set[str]:
    """Every name `path` imports (relative imports resolved against `package`), TYPE_CHECKING blocks skipped."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a name is resolved to the longest project module it starts with)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for imported in _imported_names(path, package):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of modules in a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_finder_finds_a_lazy_circle_and_ignores_type_checking(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    mod = tmp_path / "m.py"
    mod.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x.hidden\nelse:\n    import x.shown\n"
                   "def f():\n    from . import sibling\n    from ..up import thing\n")
    names = _imported_names(mod, "pkg.sub")
    assert {"x.shown", "pkg.sub.sibling", "pkg.up.thing"} <= names and "x.hidden" not in names


def test_no_import_circle():
    found = [sorted(c) for c in cycles(import_graph())]
    assert not found, f"import circles: {found}"
