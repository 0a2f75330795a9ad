"""Compiling without holding the device: the runner tells its judge when one of the candidate's kernels compiles,
so the judge can let go of the device meanwhile and other judges' timings go on (`judge/device_lock.py` is the
judge's side).

A fresh Triton kernel compiles in its first call (LLVM and ptxas: about a second of CPU and no GPU work) and a CUDA
candidate's `load_inline` builds with nvcc at import (tens of seconds). Both happen while the judge holds the device
shared (`judge/device_lock.py`), and a shared hold keeps every other judge's timing waiting: with several judges per
GPU, each fresh source stalled the device for its whole compile. Around each compile the runner now sends
`Compiling(done=False)`, compiles, sends `Compiling(done=True)` and waits for the judge's `Proceed`, which comes once
the judge holds the device again, before any GPU work. It does so only inside the requests the judge holds shared
(load, build, call), never inside a timed batch.

Nothing here is trusted: the candidate runs in this process and can call, skip or rewrite it. Skipping it only
keeps the judge's hold through the compile (as before); a pause without a compile only gives up the judge's hold
for a while; the judge bounds the pauses per request and never gives up an exclusive hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: The runner whose channel carries the pauses (`bind`); None outside a runner.
_runner: Any = None


def bind(runner: Any) -> None:
    """Pauses go through `runner` (it has `pausable`, `send` and `await_proceed`)."""
    global _runner
    _runner = runner


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Around one compile: tell the judge it starts and ends, then wait until the judge holds the device again."""
    from workbench.eval.wire.runner_messages import Compiling

    runner = _runner
    if runner is None or not runner.pausable:
        yield
        return
    runner.pausable = False  # a compile inside a compile (none in practice) is part of the outer pause
    runner.send(Compiling(done=False))
    try:
        yield
    finally:
        runner.send(Compiling(done=True))
        runner.await_proceed()
        runner.pausable = True


def install_triton() -> bool:
    """Wrap Triton's compile step (`JITFunction._do_compile`: called only when a kernel is not yet in the in-memory
    cache, in a call or an autotuner's trial) in `paused`; False where this Triton has no such step."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    original = JITFunction.__dict__.get("_do_compile")
    if original is None:
        return False
    if getattr(original, "_kwb_paused", False):
        return True

    def _do_compile(self, *args, **kwargs):
        with paused():
            return original(self, *args, **kwargs)

    _do_compile._kwb_paused = True  # type: ignore[attr-defined]
    JITFunction._do_compile = _do_compile
    return True
