"""Code for the next engineer (issue 16, docs/architecture.md): no module over 500 lines, no function over 80.

Offenders in files that are not yet split are listed with whose they are; the list may only shrink (an entry that
no longer offends fails the test too, so it is removed when fixed).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "roofline", "widgets")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

#: Known offenders (path, or path::function) -> whose file it is.
ALLOWED: dict[str, str] = {
}


def offenders() -> dict[str, int]:
    """path (or path::qualified function) -> its length in lines, for everything over the limits."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text()
            if len(text.splitlines()) > MAX_MODULE_LINES:
                found[rel] = len(text.splitlines())
            found.update(_long_functions(ast.parse(text), rel))
    return found


def _long_functions(tree: ast.AST, rel: str, prefix: str = "") -> dict[str, int]:
    found = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if node.end_lineno - start + 1 > MAX_FUNCTION_LINES:
                    found[f"{rel}::{name}"] = node.end_lineno - start + 1
            found.update(_long_functions(node, rel, f"{name}."))
    return found


def test_the_measure_counts_nested_functions_and_methods():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"class A:\n    def short(self):\n        pass\n\n    def long(self):\n{body}\n"
                     f"def outer():\n    def inner():\n{body}\n    return inner\n".replace("\n    x", "\n        x"))
    assert set(_long_functions(tree, "m.py")) == {"m.py::A.long", "m.py::outer", "m.py::outer.inner"}


def test_no_module_or_function_over_the_limits_beyond_the_known_ones():
    found = offenders()
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function: {new}"
    fixed = sorted(set(ALLOWED) - set(found))
    assert not fixed, f"no longer over the limits, remove from ALLOWED: {fixed}"
