"""How the engine's processes start: the command that runs one of its modules, and the environment the judge and
every runner share (read at process start, so a candidate cannot change it), so both sides are timed alike.

- `GOMP_SPINCOUNT`: idle OpenMP threads spin briefly, then sleep, so a side spinning after its batch does not slow
  the other's; no spin at all (`OMP_WAIT_POLICY=PASSIVE`) makes every small op pay a futex wake-up.
- `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_`: fixed, so a fresh runner reuses its heap as a long-lived
  judge does instead of faulting in every intermediate tensor again (glibc's defaults adapt to the past).
"""

from __future__ import annotations

import sys

#: Settings applied (unless the user set them) to the judge's and the runners' environments.
TIMING_ENV = {
    "GOMP_SPINCOUNT": "10000",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
}


def apply_timing_env(env: dict[str, str]) -> dict[str, str]:
    for key, value in TIMING_ENV.items():
        env.setdefault(key, value)
    return env


def module_command(module: str, *args: str) -> list[str]:
    """The command that runs `module` of this very package in a new interpreter: the working directory is left off
    sys.path (`-P`, or by hand before 3.11), so a folder named `workbench` there is never imported instead."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    bootstrap = f"import runpy, sys; sys.path.pop(0); runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", bootstrap, *args]
