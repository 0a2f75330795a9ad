"""What a Python source assigns at its top level, read statically (the source is parsed, never run).

Kept apart from `workbench.tasks.task` and `workbench.tasks.sizes` because both need it and sizes must not import
task back (task completes a partial size with sizes, so task is the layer above); a study notebook's
`parameters` cell (workbench.study.params) is read the same way.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any


def module_constants(tree: ast.Module) -> set[str]:
    """Every name a module's top level assigns (plain, tuple-unpacked or annotated): the sizes it may override."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
                elif isinstance(t, ast.Tuple):
                    names.update(e.id for e in t.elts if isinstance(e, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def top_level_assignments(source: str, evaluate: Callable[[Any, dict[str, Any]], Any]) -> dict[str, Any]:
    """`name = value` at a module's top level (plain and annotated), each value as `evaluate(node, so_far)`
    returns it, None where it raises or there is no value; {} for a source that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    out[target.id] = evaluate(value, out) if value is not None else None
                except (ValueError, TypeError, SyntaxError, ArithmeticError, MemoryError, RecursionError):
                    out[target.id] = None
    return out
