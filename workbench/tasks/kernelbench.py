"""Load KernelBench-format files (levels 1-4) unchanged as Tasks, with size overrides, a CPU fit, and the policies a
level implies.

Sizes: KernelBench problems put their sizes in module-level constants that `get_inputs()` reads at call time, so a
size override is a plain re-assignment; constants computed from overridden ones follow (workbench.tasks.constants).
`fit="cpu"` shrinks every size constant to a CPU size by the rules in workbench.tasks.fit.

Kernel policy by level (docs/verdicts.md; docs/verdicts.md says why):
    level 1   "strict"   a single op: a candidate calling the same library op does no work of its own
    level 2+  "partial"  fused op sequences and whole models: keeping cuDNN's conv or cuBLAS's GEMM and fusing the
                         rest is the standard strategy; coverage on a GPU judges the share done by the candidate
A file outside a `levelN` folder is "strict" unless `level=` or `kernel_policy=` says otherwise.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from workbench.errors import TaskError
from workbench.tasks.constants import derived_sizes
from workbench.tasks.fit import FitRules, fit_sizes
from workbench.tasks.precision import PrecisionPolicy
from workbench.tasks.task import KERNEL_POLICIES, Task

__all__ = ["derived_sizes", "detect_level", "load_kernelbench", "policy_for_level", "reference_as_candidate"]

_LEVEL = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)


def detect_level(path: str | Path) -> int | None:
    """The KernelBench level named by a folder in `path` (`.../level2/12_Gemm.py` -> 2), else None."""
    for part in reversed(Path(path).parts[:-1]):
        m = _LEVEL.match(part)
        if m:
            return int(m.group(1))
    return None


def policy_for_level(level: int | None) -> str:
    """The default kernel policy of a level (module doc)."""
    return "partial" if level is not None and level >= 2 else "strict"


def _model_doc(source: str) -> str:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node) or ""
            return " ".join(doc.split())
    return ""


def load_kernelbench(path: str | Path, sizes: dict[str, Any] | None = None, name: str | None = None, *,
                     fit: str | FitRules | None = None, level: int | None = None, kernel_policy: str | None = None,
                     precision: str | dict[str, Any] | PrecisionPolicy | None = None, **kw: Any) -> Task:
    """A Task from a KernelBench problem file.

    sizes: overrides of module-level constants (e.g. batch_size), used on every device; unknown names raise
        TaskError listing the real ones. Constants computed from overridden ones (`bias_shape = (out_channels, 1,
        1)`) follow them.
    fit: "cpu" shrinks every size constant for the CPU preset (workbench.tasks.fit; what changed goes to
        Task.notes); explicit `sizes` are kept as given. The GPU preset keeps the file's sizes (and `sizes`).
    level: the KernelBench level; detected from a `levelN` folder in the path when not given.
    kernel_policy: "strict" or "partial"; default by level (module doc).
    precision: the precision policy ("ieee" by default; "tf32" allows TF32 for reference and candidate alike).
    """
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as exc:
        raise TaskError(f"cannot read KernelBench file {path}: {exc.strerror}. Check the path.") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(f"KernelBench file {path} is not UTF-8 text: {exc.reason}") from exc
    task_name = name or path.stem
    if level is not None and (not isinstance(level, int) or isinstance(level, bool) or level < 1):
        raise TaskError(f"level must be a KernelBench level (1, 2, 3, ...), got {level!r}", task_name)
    level = level if level is not None else detect_level(path)
    policy = kernel_policy or policy_for_level(level)
    if policy not in KERNEL_POLICIES:
        raise TaskError(f"unknown kernel policy {policy!r}; choose one of {', '.join(KERNEL_POLICIES)}", task_name)
    overrides = dict(sizes or {})
    derived: dict[str, Any] = {}
    if overrides:
        try:
            derived = derived_sizes(source, overrides)
        except SyntaxError:
            pass  # Task.from_source reports it, with the line
    kw.setdefault("description", "")
    task = Task.from_source(source, name=task_name, sizes={**derived, **overrides} or None, path=str(path),
                            kernel_policy=policy, precision=precision, **kw)
    if not task.description:
        task.description = _model_doc(source)
    notes = list(task.notes)
    if level is not None:
        notes.append(f"KernelBench level {level}: kernel policy {policy}")
    if derived:
        notes.append(f"recomputed from the size overrides: {', '.join(sorted(derived))}")
    if fit is not None:
        fitted = fit_sizes(source, fit, pinned=overrides, name=task_name)
        task.sizes = {"cpu": {**fitted.sizes, **overrides}, "gpu": {**derived, **overrides}}
        notes += fitted.notes
    task.notes = tuple(notes)
    return task


def reference_as_candidate(task: Task | str, name: str | None = None):
    """The task's own reference submitted as a torch candidate: its source with `Model` renamed `ModelNew` (every
    whole-word use, so `super(Model, self)` follows). An A/A check: it must come back `ok` with a speedup near 1,
    so any other verdict is the harness's fault, not the candidate's."""
    from workbench.candidate import Candidate

    source = task.source if isinstance(task, Task) else task
    label = name or (f"{task.name}-reference" if isinstance(task, Task) else "reference")
    return Candidate(source=re.sub(r"\bModel\b", "ModelNew", source), language="torch", name=label,
                     metadata={"role": "reference-as-candidate"})
