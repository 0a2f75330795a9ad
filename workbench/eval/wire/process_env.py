"""How the engine's processes start: the command that runs one of its modules, the versions they report, and the
environment the judge and every runner share, read at process start so both sides are timed alike
(benchmarks/README.md: a brief OpenMP spin, fixed malloc thresholds).
"""

from __future__ import annotations

import sys

#: Settings applied (unless the user set them) to the judge's and the runners' environments.
TIMING_ENV = {
    "GOMP_SPINCOUNT": "10000",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
}


def versions() -> dict[str, str]:
    import torch

    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:  # pragma: no cover - triton missing
        out["triton"] = "missing"
    return out


def apply_timing_env(env: dict[str, str]) -> dict[str, str]:
    for key, value in TIMING_ENV.items():
        env.setdefault(key, value)
    return env


def module_command(module: str, *args: str) -> list[str]:
    """The command that runs `module` of this package in a new interpreter, the working directory off sys.path (a
    folder named `workbench` there is never imported instead)."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    bootstrap = f"import runpy, sys; sys.path.pop(0); runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", bootstrap, *args]
