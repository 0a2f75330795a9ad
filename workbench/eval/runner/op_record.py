"""What torch executed in one forward outside the candidate's launches: every ATen operator (a `TorchDispatchMode`) and
every export of tensor data to another library (a `TorchFunctionMode`). The judge (`checks/what_ran.py`) lets it clear a
suspicion only when `complete` (both modes innermost through forward) and agreeing with the launch tracker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
    _pop_mode,
)

from workbench.eval.runner.launches import _kernel_objects
from workbench.eval.wire.runner_messages import OpRecord
from workbench.lazy_dynamo import dispatch_function, spare_dynamo_import

#: At most this many distinct operator names are kept per call (a forward that runs more is `truncated`).
MAX_NAMES = 256
#: Tensor methods that hand a tensor's data to another library (numpy, DLPack consumers).
EXPORTS = frozenset({"numpy", "__array__", "__dlpack__"})


@dataclass
class _State:
    ops: dict[str, int] = field(default_factory=dict)
    exports: dict[str, int] = field(default_factory=dict)
    launches: int = 0
    inside_launch: int = 0
    truncated: bool = False
    probe_seen: bool = False

    def count(self, name: str) -> None:
        if name in self.ops or len(self.ops) < MAX_NAMES:
            self.ops[name] = self.ops.get(name, 0) + 1
        else:
            self.truncated = True


class _DispatchRecord(TorchDispatchMode):
    """Counts every ATen operator outside the candidate's launches; sees the probe dispatched after forward."""

    def __init__(self, state: _State):
        super().__init__()
        self.state = state

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.alias.default and args and args[0] is _PROBE[0]:
            self.state.probe_seen = True
        elif not self.state.inside_launch:
            self.state.count(str(func))
        return func(*args, **(kwargs or {}))


class _ExportRecord(TorchFunctionMode):
    """Counts the elements of tensors handed to another library outside the candidate's launches."""

    def __init__(self, state: _State):
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in EXPORTS and not self.state.inside_launch and args and isinstance(args[0], torch.Tensor):
            self.state.exports[name] = self.state.exports.get(name, 0) + int(args[0].numel())
        return func(*args, **(kwargs or {}))


#: A tensor the record dispatches one operator on after forward, proving the dispatcher still reached the record.
_PROBE: list[torch.Tensor] = []


@contextlib.contextmanager
def _outside_launches(module: Any, state: _State) -> Iterator[None]:
    """Count the module's own kernel launches and leave what happens inside them out of the record."""
    hooks = []
    for _, obj, language in _kernel_objects(module):
        hook = language.launch_hook(obj)

        def run(*args, _inner=hook.original, **kwargs):
            if not kwargs.get("warmup", False):
                state.launches += 1
            state.inside_launch += 1
            try:
                return _inner(*args, **kwargs)
            finally:
                state.inside_launch -= 1

        hook.install(run)
        hooks.append(hook)
    try:
        yield
    finally:
        for hook in reversed(hooks):
            hook.restore()


class Recording:
    """What `recording` yields: `report()` after the block is the call's OpRecord (None when not recording)."""

    def __init__(self, state: _State | None):
        self.state = state
        self.complete = False

    def report(self) -> OpRecord | None:
        s = self.state
        return None if s is None else OpRecord(ops=dict(s.ops), exports=dict(s.exports), launches=s.launches,
                                                complete=self.complete, truncated=s.truncated)


#: Sealed by the runner: the record's methods and DISPATCH's `__dynamo_disable` (what torch's guard calls).
RECORDERS = (_State, _DispatchRecord, _ExportRecord, Recording)
spare_dynamo_import()  # in the fork server, before any runner: no runner imports Dynamo just to record
DISPATCH = dispatch_function(_DispatchRecord)


@contextlib.contextmanager
def recording(module: Any, enabled: bool = True) -> Iterator[Recording]:
    """Record the ops of the block; a mode gone or displaced at the end leaves the record incomplete."""
    if not enabled:
        yield Recording(None)
        return
    state = _State()
    result = Recording(state)
    dispatch, export = _DispatchRecord(state), _ExportRecord(state)
    if not _PROBE:
        _PROBE.append(torch.zeros(1))
    with _outside_launches(module, state):
        export.__enter__()
        dispatch.__enter__()
        try:
            yield result
        finally:
            functions = _get_current_function_mode_stack()
            innermost = _get_current_dispatch_mode() is dispatch and bool(functions) and functions[-1] is export
            if innermost:
                torch.ops.aten.alias.default(_PROBE[0])
            result.complete = innermost and state.probe_seen
            _leave(dispatch, export, innermost)


def _leave(dispatch: Any, export: Any, innermost: bool) -> None:
    """Pop both modes; where the candidate displaced them, unwind its modes too."""
    if innermost:
        dispatch.__exit__(None, None, None)
        export.__exit__(None, None, None)
        return
    with contextlib.suppress(Exception):
        while dispatch in _get_current_dispatch_mode_stack():
            _pop_mode()
    with contextlib.suppress(Exception):
        while export in _get_current_function_mode_stack():
            torch._C._pop_torch_function_stack()
