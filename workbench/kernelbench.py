"""Load KernelBench-format files (levels 1-3) unchanged as Tasks, with optional size overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import TaskError
from workbench.task import Task


def load_kernelbench(path: str | Path, sizes: dict[str, Any] | None = None, name: str | None = None, **kw: Any) -> Task:
    """A Task from a KernelBench problem file. `sizes` overrides module-level constants (e.g. batch_size)
    so large L1/L2 problems run in seconds on a CPU; unknown names raise TaskError listing the real ones."""
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as exc:
        raise TaskError(f"cannot read KernelBench file {path}: {exc.strerror}") from exc
    task = Task.from_source(source, name=name or path.stem, sizes=sizes, path=str(path), **kw)
    return task
