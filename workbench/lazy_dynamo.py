"""torch's dispatch modes (FakeTensorMode, FlopCounterMode, the runner's op record) without importing Dynamo to run.

torch wraps every `TorchDispatchMode.__torch_dispatch__` so that Dynamo never traces it, and that wrapper imports
`torch._dynamo` (about 1.5 CPU seconds) on its first call, even in a process that never compiles anything. Until some
code imports Dynamo no frame can be traced, so there is nothing to keep out: the mode runs as written. From the first
call after an import on, the mode runs through torch's own guard, and Dynamo skips this module's frame as it skips
torch's. The function torch's wrapper calls never changes, so the runner can seal it. Costs in benchmarks/README.md.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

#: The attribute where torch's wrapper (`torch._compile._disable_dynamo`) caches the Dynamo-disabled function.
_CACHE = "__dynamo_disable"


def _until_dynamo_loads(raw: Callable[..., Any]) -> Callable[..., Any]:
    guarded: list[Callable[..., Any]] = []  # torch's guard around `raw`, made once Dynamo is loaded

    def call(*args: Any, **kwargs: Any) -> Any:
        if guarded:
            return guarded[0](*args, **kwargs)
        if "torch._dynamo" not in sys.modules:
            return raw(*args, **kwargs)
        import torch._dynamo

        with contextlib.suppress(Exception):  # a torch without it: Dynamo may trace this small frame, nothing else
            from torch._dynamo.eval_frame import skip_code

            skip_code(call.__code__)
        guarded.append(torch._dynamo.disable(raw, recursive=True))
        return guarded[0](*args, **kwargs)

    return call


def dispatch_function(mode: type) -> Callable[..., Any] | None:
    """The `__torch_dispatch__` that torch's wrapper on `mode` calls; None where `mode` has no wrapped one."""
    raw = getattr(mode.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    return raw if callable(raw) else None


def spare_dynamo_import() -> None:
    """Let every dispatch mode class defined so far run without Dynamo until something imports it (idempotent)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    pending: list[type] = [TorchDispatchMode]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        raw = dispatch_function(cls)
        if raw is not None and getattr(raw, _CACHE, None) is None:
            setattr(raw, _CACHE, _until_dynamo_loads(raw))
