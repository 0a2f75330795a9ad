"""One exception root for the workbench; every subclass carries the fields a caller needs to act."""

from __future__ import annotations

from types import ModuleType


class WorkbenchError(Exception):
    """Root of every error the workbench raises on purpose. Messages say what to do next."""


class UnknownNameError(WorkbenchError, KeyError):
    """A registry lookup failed; the message lists the names that exist."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        plural = kind[:-1] + "ies" if kind.endswith("y") and kind[-2:-1] not in "aeiou" else kind + "s"
        super().__init__(f"unknown {kind} {name!r}; known {plural}: {', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:  # KeyError would quote the whole message otherwise
        return self.args[0]


class TaskError(WorkbenchError):
    """A task definition or a KernelBench file is unusable."""

    def __init__(self, message: str, task: str | None = None):
        self.task = task
        super().__init__(message)


class CandidateError(WorkbenchError):
    """A candidate cannot be built from what was given (bad language, unreadable file)."""


class WorkerError(WorkbenchError):
    """The evaluation worker could not be started or talked to (not a candidate failure)."""


class StoreError(WorkbenchError):
    """The results store could not be opened or written."""


class MissingDependencyError(WorkbenchError, ImportError):
    """An optional dependency is needed for this feature; the message gives the pip command."""

    def __init__(self, package: str, extra: str, feature: str):
        self.package, self.extra, self.feature = package, extra, feature
        super().__init__(
            f"{feature} needs the package {package!r}. Install it with "
            f"`pip install 'kernel-workbench[{extra}]'` (or `pip install {package}`)."
        )


def require(module: str, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import an optional dependency or fail with an install hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(package or module.split(".")[0], extra, feature) from exc
