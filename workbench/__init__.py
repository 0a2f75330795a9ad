"""Kernel Workbench: evaluate GPU kernels (Triton, CUDA, PyTorch) for correctness, speed and roofline share.

    import workbench as wb
    task = wb.get_task("softmax")
    res = wb.evaluate(task, wb.Candidate(source=src, language="triton"))

Every public name loads on first use: the untrusted runner process imports `workbench.eval.runner` and must not
pull in the caller's side (`evaluate`, the judge handles) or the judge's by importing this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> (module, attribute); attribute None means the module itself.
_PUBLIC: dict[str, tuple[str, str | None]] = {
    "LANGUAGES": ("workbench.candidate", "LANGUAGES"),
    "Candidate": ("workbench.candidate", "Candidate"),
    "WorkbenchError": ("workbench.errors", "WorkbenchError"),
    "UnknownNameError": ("workbench.errors", "UnknownNameError"),
    "TaskError": ("workbench.errors", "TaskError"),
    "CandidateError": ("workbench.errors", "CandidateError"),
    "WorkerError": ("workbench.errors", "WorkerError"),
    "StoreError": ("workbench.errors", "StoreError"),
    "MissingDependencyError": ("workbench.errors", "MissingDependencyError"),
    "evaluate": ("workbench.eval.evaluate", "evaluate"),
    "evaluate_many": ("workbench.eval.evaluate", "evaluate_many"),
    "EvalOptions": ("workbench.eval.options", "EvalOptions"),
    "FLAGS": ("workbench.eval.checks.flags", "FLAGS"),
    "Finding": ("workbench.eval.checks.flags", "Finding"),
    "STATUSES": ("workbench.result", "STATUSES"),
    "Result": ("workbench.result", "Result"),
    "Timing": ("workbench.result", "Timing"),
    "Task": ("workbench.tasks.task", "Task"),
    "Tolerance": ("workbench.tasks.task", "Tolerance"),
    "get_task": ("workbench.tasks.task", "get_task"),
    "register_task": ("workbench.tasks.task", "register_task"),
    # `wb.tasks()` lists task names; the name is also the package `workbench.tasks`, callable for that reason.
    "tasks": ("workbench.tasks", None),
    "load_kernelbench": ("workbench.tasks.kernelbench", "load_kernelbench"),
    "Store": ("workbench.store", "Store"),
    "lineage": ("workbench.llm.agent", "lineage"),
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}") from None
    loaded = importlib.import_module(module)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:  # static checkers see the public API as ordinary imports
    from workbench import tasks as tasks
    from workbench.candidate import LANGUAGES as LANGUAGES
    from workbench.candidate import Candidate as Candidate
    from workbench.errors import CandidateError as CandidateError
    from workbench.errors import MissingDependencyError as MissingDependencyError
    from workbench.errors import StoreError as StoreError
    from workbench.errors import TaskError as TaskError
    from workbench.errors import UnknownNameError as UnknownNameError
    from workbench.errors import WorkbenchError as WorkbenchError
    from workbench.errors import WorkerError as WorkerError
    from workbench.eval.checks.flags import FLAGS as FLAGS
    from workbench.eval.checks.flags import Finding as Finding
    from workbench.eval.evaluate import evaluate as evaluate
    from workbench.eval.evaluate import evaluate_many as evaluate_many
    from workbench.eval.options import EvalOptions as EvalOptions
    from workbench.llm.agent import lineage as lineage
    from workbench.result import STATUSES as STATUSES
    from workbench.result import Result as Result
    from workbench.result import Timing as Timing
    from workbench.store import Store as Store
    from workbench.tasks.kernelbench import load_kernelbench as load_kernelbench
    from workbench.tasks.task import Task as Task
    from workbench.tasks.task import Tolerance as Tolerance
    from workbench.tasks.task import get_task as get_task
    from workbench.tasks.task import register_task as register_task
