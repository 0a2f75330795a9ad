"""Compiling without holding the device (the judge's side: `judge/device_lock.py`): around each Triton compile or
`load_inline` build the runner sends `Compiling(done=False)`, then `Compiling(done=True)`, and waits for `Proceed`,
so other judges' timings run meanwhile. Nothing here is trusted: the judge bounds the pauses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: The runner whose channel carries the pauses (`bind`); None outside a runner.
_runner: Any = None


def bind(runner: Any) -> None:
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
    runner.pausable = False  # a nested compile is part of the outer pause
    runner.send(Compiling(done=False))
    try:
        yield
    finally:
        runner.send(Compiling(done=True))
        runner.await_proceed()
        runner.pausable = True


def install_triton() -> bool:
    """Wrap Triton's compile step (`JITFunction._do_compile`) in `paused`; False where this Triton has none."""
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
