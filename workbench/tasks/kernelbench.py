"""Load KernelBench-format files (levels 1-3) unchanged as Tasks, with optional size overrides.

KernelBench problems put their sizes in module-level constants that `get_inputs()` reads at call time, so a
size override is a plain re-assignment. Some constants are computed from others when the file is imported
(`bias_shape = (out_channels, 1, 1)`, `input_shape = (num_classes,)`); re-assigning only `out_channels` would
leave them stale and break the model, so the loader recomputes those too.
"""

from __future__ import annotations

import ast
import operator
from pathlib import Path
from typing import Any

from workbench.errors import TaskError
from workbench.tasks.task import Task

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class _NotConstant(Exception):
    """An expression that is not plain arithmetic on literals and known constants."""


def _evaluate(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate literals, names from `env`, tuples/lists and arithmetic; anything else is not a size."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _NotConstant(node.id)
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_evaluate(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand, env))
    raise _NotConstant(ast.dump(node)[:40])


def _constant_values(tree: ast.Module, sizes: dict[str, Any]) -> dict[str, Any]:
    """Values of the plain-arithmetic top-level constants, in file order, with `sizes` substituted."""
    env: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
        if not names or not all(isinstance(n, ast.Name) for n in names):
            continue
        try:
            value = _evaluate(node.value, env)
            values = [value] if isinstance(target, ast.Name) else list(value)
        except (_NotConstant, ArithmeticError, TypeError):
            values = None
        if values is not None and len(values) != len(names):
            values = None
        for i, n in enumerate(names):
            if n.id in sizes:
                env[n.id] = sizes[n.id]
            elif values is None:
                env.pop(n.id, None)  # not plain arithmetic: lines using it are left alone
            else:
                env[n.id] = values[i]
    return env


def derived_sizes(source: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Module constants computed from overridden ones, recomputed with the overrides applied.

    E.g. with `sizes={"out_channels": 8}` the line `bias_shape = (out_channels, 1, 1)` yields
    `{"bias_shape": (8, 1, 1)}`. Only constants whose value changes are returned; names in `sizes` win.
    """
    tree = ast.parse(source)
    before, after = _constant_values(tree, {}), _constant_values(tree, sizes)
    return {k: v for k, v in after.items() if k not in sizes and k in before and before[k] != v}


def _model_doc(source: str) -> str:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node) or ""
            return " ".join(doc.split())
    return ""


def load_kernelbench(path: str | Path, sizes: dict[str, Any] | None = None, name: str | None = None, **kw: Any) -> Task:
    """A Task from a KernelBench problem file. `sizes` overrides module-level constants (e.g. batch_size)
    so large L1/L2 problems run in seconds on a CPU; unknown names raise TaskError listing the real ones.
    Constants computed from overridden ones (e.g. `bias_shape = (out_channels, 1, 1)`) follow them."""
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as exc:
        raise TaskError(f"cannot read KernelBench file {path}: {exc.strerror}. Check the path.") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(f"KernelBench file {path} is not UTF-8 text: {exc.reason}") from exc
    task_name = name or path.stem
    overrides = dict(sizes or {})
    derived: dict[str, Any] = {}
    if overrides:
        try:
            derived = derived_sizes(source, overrides)
        except SyntaxError:
            pass  # Task.from_source reports it, with the line
    kw.setdefault("description", "")
    task = Task.from_source(source, name=task_name, sizes={**derived, **overrides} or None, path=str(path), **kw)
    if not task.description:
        task.description = _model_doc(source)
    if derived:
        task.notes = (*task.notes, f"recomputed from the size overrides: {', '.join(sorted(derived))}")
    return task
