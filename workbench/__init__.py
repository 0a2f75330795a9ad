"""Kernel Workbench: evaluate GPU kernels (Triton, CUDA, PyTorch) for correctness, speed and roofline share.

    import workbench as wb
    task = wb.get_task("softmax")
    res = wb.evaluate(task, wb.Candidate(source=src, language="triton"))
"""

from __future__ import annotations

from workbench.candidate import LANGUAGES, Candidate
from workbench.errors import (
    CandidateError,
    MissingDependencyError,
    StoreError,
    TaskError,
    UnknownNameError,
    WorkbenchError,
    WorkerError,
)
from workbench.eval.evaluate import evaluate, evaluate_many  # bound eagerly: the submodule shares the name
from workbench.eval.findings import FLAGS, Finding
from workbench.result import STATUSES, Result, Timing
from workbench.tasks.task import Task, Tolerance, get_task, register_task

# `wb.tasks()` lists task names; the name is also the package `workbench.tasks`, which is callable for that reason.
import workbench.tasks as tasks  # noqa: E402  isort: skip

__version__ = "0.1.0"

__all__ = [
    "LANGUAGES", "STATUSES", "FLAGS", "Candidate", "Task", "Tolerance", "Result", "Timing", "Finding",
    "WorkbenchError", "UnknownNameError", "TaskError", "CandidateError", "WorkerError", "StoreError",
    "MissingDependencyError", "tasks", "get_task", "register_task", "load_kernelbench", "evaluate", "Store",
    "lineage", "evaluate_many",
]


def __getattr__(name: str):
    # Heavier pieces load on first use so `import workbench` stays fast and dependency-light.
    if name == "load_kernelbench":
        from workbench.tasks.kernelbench import load_kernelbench

        return load_kernelbench
    if name == "Store":
        from workbench.store import Store

        return Store
    if name == "lineage":
        from workbench.llm.agent import lineage

        return lineage
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
