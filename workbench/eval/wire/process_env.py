"""How the engine's own processes start: the command that runs one of its modules, and the environment settings the
judge and every runner share, so the reference and the candidate are timed on the same machine (in the runtime's
sense, not only the hardware's).

Both are read when a process starts (by libgomp and by glibc's malloc), so they are set in the environment of the
judge and of the fork server that runners are forked from; a candidate cannot change them for the timed code.

- `GOMP_SPINCOUNT`: idle OpenMP threads spin briefly, then sleep. The judge and a runner take turns on the same
  cores, and a side spinning long after its batch would slow the other's. Not `OMP_WAIT_POLICY=PASSIVE`: with no
  spin at all, every small op pays a futex wake-up (a 5x37 softmax: 2 us -> 70 us).
- `MALLOC_MMAP_THRESHOLD_` / `MALLOC_TRIM_THRESHOLD_`: allocations up to 32 MiB come from the heap, and freed heap
  is kept. glibc's defaults adapt to what a process has freed before, so a long-lived judge reused its heap while
  a fresh runner mapped and faulted in every intermediate tensor again on every call (a KernelBench conv +
  GroupNorm model: 1543 page faults per forward, 4.3 ms in the runner against 1.2 ms for the same code in the
  judge). Fixed thresholds make both sides reuse memory the same way after warm-up.
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
    """The command that runs `module` of this very package in a new interpreter, whatever the working directory.

    `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH, so a folder named `workbench`
    there (a user's own project, another checkout of the engine) was imported in place of the package the caller
    runs: a judge of another version, or none at all. `-P` (Python 3.11+) leaves the working directory out; on
    older Pythons the same is done by hand before the module runs."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    bootstrap = f"import runpy, sys; sys.path.pop(0); runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", bootstrap, *args]
