"""Triton: `@triton.jit` kernels launched from forward. On a CPU they run under Triton's interpreter; the runner
counts launches through each kernel object's `run` (`runner/launches.py`)."""

from __future__ import annotations

import re
from typing import Any

from workbench.languages.base import Language, objects_of_type


class Triton(Language):
    def detect(self, source: str) -> bool:
        return bool(re.search(r"@\s*triton\.(jit|autotune|heuristics)", source)) or "import triton" in source

    def kernel_objects(self, module: Any) -> list[tuple[str, Any]]:
        """The jit, autotune and heuristics wrappers in the module's globals and classes."""
        try:
            from triton.runtime.jit import KernelInterface
        except Exception:  # pragma: no cover - triton missing
            return []
        return objects_of_type(module, KernelInterface)

    def probe_target(self) -> tuple[type, str] | None:
        try:
            from triton.runtime import interpreter
        except Exception:  # pragma: no cover - no interpreter in this triton
            return None
        return interpreter.GridExecutor, "__call__"

    def kernel_names(self, module: Any) -> set[str]:
        """The names the runner reports: each object's name and its innermost function's name."""
        names = set()
        for name, obj in self.kernel_objects(module):
            names.add(name)
            fn = getattr(obj, "fn", None)
            while fn is not None and not hasattr(fn, "__name__"):
                fn = getattr(fn, "fn", None)
            if fn is not None:
                names.add(getattr(fn, "__name__", name))
        return names


LANGUAGE = Triton(name="triton", title="Triton", decorators=("triton.jit", "triton.autotune", "triton.heuristics"),
                  contract="triton_contract", module="triton", distribution="triton", compiled=True,
                  tracks_launches=True, interpreted_on_cpu=True,
                  cpu_runtime="Triton's CPU interpreter")
