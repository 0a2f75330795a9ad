"""Module-level constants of a KernelBench-format file, read from its AST without importing it.

KernelBench problems keep their sizes in module-level constants that `get_inputs()` reads at call time, so a size
override is a plain re-assignment. Some constants are computed from others when the file is imported
(`bias_shape = (out_channels, 1, 1)`, `N = 2 * M`, `input_shape = (batch_size, *features)`); re-assigning only the
source constant would leave them stale and break the model, so they are recomputed here with the overrides applied.
Only safe expressions are evaluated (literals, names, containers, arithmetic, and a few pure builtins such as `int`,
`min`, `len`, `math.prod`); a line using anything else is left alone (its value stays the file's).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
#: Pure functions a size expression may call.
_CALLS = {"int": int, "float": float, "min": min, "max": max, "abs": abs, "round": round, "len": len,
          "tuple": tuple, "list": list, "sum": sum}
_MATH = {"ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt, "prod": math.prod, "log2": math.log2,
         "gcd": math.gcd, "isqrt": math.isqrt}


class NotConstant(Exception):
    """An expression that is not plain arithmetic on literals and known constants."""


def evaluate(node: ast.AST, env: dict[str, Any]) -> Any:
    """Evaluate literals, names from `env`, tuples/lists (with `*starred` parts), indexing, arithmetic and the pure
    calls above; anything else raises NotConstant."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise NotConstant(node.id)
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        items: list[Any] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                items.extend(evaluate(e.value, env))
            else:
                items.append(evaluate(e, env))
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](evaluate(node.operand, env))
    if isinstance(node, ast.Subscript):
        return evaluate(node.value, env)[evaluate(node.slice, env)]
    if isinstance(node, ast.Slice):
        parts = [evaluate(p, env) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.Call) and not node.keywords:
        fn = None
        if isinstance(node.func, ast.Name) and node.func.id not in env:
            fn = _CALLS.get(node.func.id)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == "math":
            fn = _MATH.get(node.func.attr)
        if fn is not None:
            return fn(*[evaluate(a, env) for a in node.args])
    raise NotConstant(ast.dump(node)[:40])


@dataclass(frozen=True)
class Assignment:
    """One top-level `name = expr` (a tuple target gives one per name; `index` is the position in the tuple)."""

    name: str
    expr: ast.expr | None  # the name's own expression where the value is a same-length tuple/list literal
    whole: ast.expr
    index: int | None
    line: int


def assignments(tree: ast.Module) -> Iterator[Assignment]:
    """Top-level assignments to plain names, in file order."""
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            yield Assignment(node.target.id, node.value, node.value, None, node.lineno)
            continue
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:  # `height = width = 128` binds both names to one value
            if isinstance(target, ast.Name):
                yield Assignment(target.id, node.value, node.value, None, node.lineno)
            elif isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(n, ast.Name) for n in target.elts):
                parts = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) and \
                    len(node.value.elts) == len(target.elts) else None
                for i, n in enumerate(target.elts):
                    yield Assignment(n.id, parts[i] if parts else None, node.value, i, node.lineno)


def value_of(a: Assignment, env: dict[str, Any]) -> Any:
    """The value `a` assigns given `env`; NotConstant when it cannot be computed safely."""
    if a.index is None:
        return evaluate(a.whole, env)
    if a.expr is not None:
        return evaluate(a.expr, env)
    values = list(evaluate(a.whole, env))
    return values[a.index]


def constant_values(tree: ast.Module, sizes: dict[str, Any]) -> dict[str, Any]:
    """Values of the safely computable top-level constants, in file order, with `sizes` substituted."""
    env: dict[str, Any] = {}
    for a in assignments(tree):
        if a.name in sizes:
            env[a.name] = sizes[a.name]
            continue
        try:
            env[a.name] = value_of(a, env)
        except (NotConstant, ArithmeticError, TypeError, ValueError, IndexError, KeyError):
            env.pop(a.name, None)  # not safe arithmetic: lines using it are left alone
    return env


def references(expr: ast.AST | None, names: set[str] | dict[str, Any]) -> bool:
    """Whether `expr` reads any of `names` (a constant defined earlier in the file)."""
    return expr is not None and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def derived_sizes(source: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Module constants computed from overridden ones, recomputed with the overrides applied.

    E.g. with `sizes={"out_channels": 8}` the line `bias_shape = (out_channels, 1, 1)` yields
    `{"bias_shape": (8, 1, 1)}`. Only constants whose value changes are returned; names in `sizes` win.
    """
    tree = ast.parse(source)
    before, after = constant_values(tree, {}), constant_values(tree, sizes)
    return {k: v for k, v in after.items() if k not in sizes and k in before and before[k] != v}
