"""Compiling without holding the device (the judge's side: `judge/device_lock.py`): around each Triton compile, each
`torch.compile` frame compile (Dynamo's tracing and Inductor's code generation: seconds to a minute of CPU) and each
`load_inline` build the runner sends `Compiling(done=False)`, then `Compiling(done=True)`, and waits for `Proceed`, so
other judges' timings run meanwhile. Nothing here is trusted: the judge bounds the pauses."""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
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
    return _wrap(JITFunction, "_do_compile", JITFunction.__dict__.get("_do_compile"))


def _wrap(owner: Any, name: str, original: Any) -> bool:
    """Set `owner.name` to `original` run in `paused` (once); False where there is no `original`."""
    if original is None:
        return False
    if getattr(original, "_kwb_paused", False):
        return True

    def wrapper(*args, **kwargs):
        with paused():
            return original(*args, **kwargs)

    wrapper._kwb_paused = True  # type: ignore[attr-defined]
    setattr(owner, name, wrapper)
    return True


#: The module whose `_compile` compiles one frame for `torch.compile`.
_DYNAMO = "torch._dynamo.convert_frame"


def install_dynamo() -> bool:
    """Wrap Dynamo's frame compile (`convert_frame._compile`) in `paused`: now if it is imported, else as soon as a
    candidate imports it (GPU runners do not import Dynamo before the candidate does)."""
    module = sys.modules.get(_DYNAMO)
    if module is not None:
        return _wrap_dynamo(module)
    if not any(isinstance(finder, _WrapDynamoOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapDynamoOnImport())
    return True


def _wrap_dynamo(module: Any) -> bool:
    # Called through the module's globals, so every frame compile meets the wrapper.
    return _wrap(module, "_compile", getattr(module, "_compile", None))


class _WrapDynamoOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find Dynamo's frame compiler, and wraps its `_compile` once run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _DYNAMO:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module  # this module's own loader instance: wrapping it touches nothing else

                def exec_module(module: Any, run: Any = run) -> None:
                    run(module)
                    _wrap_dynamo(module)

                spec.loader.exec_module = exec_module
                return spec
        return None
