"""Built-in tasks. Each module beside this file is a KernelBench-format reference whose `task()` function (below
a marked line) declares presets, dtypes, tolerances and work formulas; importing this package registers them
all, lazily: a module is imported the first time its task is asked for.

    import workbench as wb
    wb.get_task("softmax").sizes["cpu"]      # {'batch_size': 64, 'dim': 256}
    reference_source(wb.get_task("softmax"))  # the KernelBench part only, for prompts
"""

from __future__ import annotations

import importlib
import sys
import types

from workbench.tasks._builtin import MARKER, builtin_task, reference_source, solution_path
from workbench.tasks.task import Task, register_task

#: Built-in task names; each is a module `workbench.tasks.<name>` and a solution `solutions/<name>.py`.
BUILTIN = (
    "vector_add",
    "gelu",
    "softmax",
    "layernorm",
    "rmsnorm",
    "row_sum",
    "matmul",
    "cross_entropy",
    "attention",
    "conv2d",
)

__all__ = ["BUILTIN", "MARKER", "builtin_task", "reference_source", "solution_path", "load_builtin"]


def load_builtin(name: str) -> Task:
    """Import `workbench.tasks.<name>` and build its Task (what the registry calls on first use)."""
    return importlib.import_module(f"{__name__}.{name}").task()


def _factory(name: str):
    def build() -> Task:
        return load_builtin(name)

    build.__name__ = f"build_{name}"
    return build


for _name in BUILTIN:
    register_task(_factory(_name), name=_name)


class _CallablePackage(types.ModuleType):
    """Importing this package binds it as `workbench.tasks`, shadowing the function `workbench.tasks()`;
    making the package callable keeps `wb.tasks()` working either way."""

    def __call__(self) -> list[str]:
        from workbench.tasks.task import tasks

        return tasks()


sys.modules[__name__].__class__ = _CallablePackage
