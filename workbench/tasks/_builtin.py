"""Build a built-in Task from its own module file: the KernelBench part above a marker, metadata below it.

A task module is a KernelBench problem file (so the worker can import it as the reference unchanged) that
ends with a `task()` function declaring presets, dtypes, tolerances and work formulas. Keeping both in one
file means the numbers a formula uses cannot drift from the constants the reference uses.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from workbench.errors import TaskError
from workbench.tasks.task import Task, Tolerance

#: Everything from this line on is workbench metadata, not part of the KernelBench reference.
MARKER = "# ==== workbench task metadata"

SOLUTIONS_DIR = Path(__file__).resolve().parent / "solutions"

_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}

Formula = Callable[[SimpleNamespace], float]


def module_defaults(source: str) -> dict[str, Any]:
    """Module-level `NAME = <literal>` constants, plus `dtype = torch.<name>` as the dtype's name."""
    values: dict[str, Any] = {}
    tree = ast.parse(source)
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name == "dtype" and isinstance(value, ast.Attribute):
            values["dtype"] = value.attr
            continue
        try:
            values[name] = ast.literal_eval(value)
        except ValueError:
            continue
    return values


def size_namespace(defaults: dict[str, Any], size: dict[str, Any]) -> SimpleNamespace:
    """The size a formula sees: module defaults overridden by `size`, plus `itemsize` of its dtype."""
    merged = {**defaults, **size}
    dtype = merged.get("dtype", "float32")
    dtype = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if dtype not in _ITEMSIZE:
        raise TaskError(f"unknown dtype {dtype!r} in size {size}; use one of {', '.join(_ITEMSIZE)}")
    merged["dtype"] = dtype
    return SimpleNamespace(**merged, itemsize=_ITEMSIZE[dtype])


def _wrap(formula: Formula | None, defaults: dict[str, Any]) -> Callable[[dict[str, Any]], float] | None:
    if formula is None:
        return None

    def count(size: dict[str, Any]) -> float:
        return float(formula(size_namespace(defaults, size)))

    count.__doc__ = formula.__doc__
    return count


def solution_path(name: str) -> Path:
    """Where the reference Triton solution of built-in task `name` lives (it may not exist)."""
    return SOLUTIONS_DIR / f"{name}.py"


def builtin_task(
    file: str,
    name: str,
    *,
    description: str,
    sizes: dict[str, dict[str, Any]],
    sweep: dict[str, list[dict[str, Any]]],
    dtypes: tuple[str, ...] = ("float32",),
    tolerances: dict[str, tuple[float, float]] | None = None,
    flops: Formula | None = None,
    bytes: Formula | None = None,  # noqa: A002 - mirrors Task.bytes
    min_flops: Formula | None = None,
    notes: tuple[str, ...] = (),
) -> Task:
    """A Task whose source is the text of `file`.

    `flops`/`bytes`/`min_flops` take a namespace of the module's constants overridden by the size dict, with `dtype`
    as a name and `itemsize` in bytes, so `lambda s: 2 * s.M * s.N * s.K` works for any partial size. `min_flops`
    is a true lower bound (faster-than-physics uses it), never the reference's own count.
    `Task.solution` holds the reference solution's source text (see `solution_path` for its file).
    """
    path = Path(file)
    source = path.read_text()
    if MARKER not in source:
        raise TaskError(f"built-in task {name!r}: {path} lacks the metadata marker line {MARKER!r}", name)
    defaults = module_defaults(source.split(MARKER, 1)[0])
    sol = solution_path(name)
    task = Task(
        name=name,
        source=source,
        sizes=sizes,
        sweep=sweep,
        dtypes=tuple(dtypes),
        tolerances={k: Tolerance(*v) for k, v in (tolerances or {}).items()},
        flops=_wrap(flops, defaults),
        bytes=_wrap(bytes, defaults),
        min_flops=_wrap(min_flops, defaults),
        solution=sol.read_text() if sol.exists() else None,
        description=description,
        path=str(path),
        notes=tuple(notes),
    )
    return task


def reference_source(task: Task) -> str:
    """The pure KernelBench part of a task's source (for prompts): everything above the metadata marker."""
    head = task.source.split(MARKER, 1)[0]
    return head.rstrip() + "\n"
