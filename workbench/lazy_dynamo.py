"""torch's dispatch modes (FakeTensorMode, FlopCounterMode, the runner's op record) without importing Dynamo on first use.

torch wraps every `TorchDispatchMode.__torch_dispatch__` so that Dynamo never traces it, and that wrapper imports
`torch._dynamo` (about 1.5 CPU seconds) on its first call, even in a process that never compiles anything. Until some
code imports Dynamo no frame can be traced, so there is nothing to keep out: the mode runs as written. The first call
after an import hands the mode back to torch's own guard, which it keeps from then on. Costs in benchmarks/README.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

#: The attribute where torch's wrapper (`torch._compile._disable_dynamo`) caches the Dynamo-disabled function.
_CACHE = "__dynamo_disable"


def _until_dynamo_loads(raw: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return raw(*args, **kwargs)
        import torch._dynamo

        guarded = torch._dynamo.disable(raw, recursive=True)
        setattr(raw, _CACHE, guarded)  # what torch's wrapper would have cached: this function is never called again
        return guarded(*args, **kwargs)

    return call


def spare_dynamo_import() -> None:
    """Let every dispatch mode class defined so far run without Dynamo until something imports it (idempotent)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    pending: list[type] = [TorchDispatchMode]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        raw = getattr(cls.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
        if callable(raw) and getattr(raw, _CACHE, None) is None:
            setattr(raw, _CACHE, _until_dynamo_loads(raw))
