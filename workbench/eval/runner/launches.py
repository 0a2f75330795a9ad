"""Launch tracking in the runner (for `checks/runtime.judge_launches`): which of the candidate's Triton kernels ran in a
call and with which tensors, bound at import before any candidate. On the CPU every tensor a launch gets is copied
before and after it: content no launch produced is "foreign", and an output still foreign at return was computed
elsewhere."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from workbench import languages as _languages
from workbench.eval.wire.runner_messages import LaunchReport

# Bound at import, before any candidate (module doc).
_Tensor, _equal, _clone, _detach = torch.Tensor, torch.equal, torch.Tensor.clone, torch.Tensor.detach
_view, _reshape, _all = torch.Tensor.view, torch.Tensor.reshape, torch.Tensor.all
_untyped_storage, _storage_ptr = torch.Tensor.untyped_storage, torch.UntypedStorage.data_ptr
_tensor_ptr, _numel, _element_size = torch.Tensor.data_ptr, torch.Tensor.numel, torch.Tensor.element_size
_threads, _thread_time_ns = threading.enumerate, time.thread_time_ns
_isinstance, _type, _list, _len, _bool, _tuple, _getattr = isinstance, type, list, len, bool, tuple, getattr
_INT_OF_SIZE = MappingProxyType({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64})


@dataclass
class LaunchLog:
    """Launches of the candidate's own kernels seen while the tracker was active, and the tensors they got."""

    launches: list[str] = field(default_factory=list)
    storages: set[int] = field(default_factory=set)
    outputs: list[Any] = field(default_factory=list)
    kernels_found: list[str] = field(default_factory=list)
    #: Tensors given to launches, held until the call ends, so the output cannot reuse a freed buffer's address.
    alive: list[Any] = field(default_factory=list)
    #: CPU storage -> {view key: (view, its bytes right after the last launch that got this storage)}.
    after: dict[int, dict[tuple, tuple[Any, Any]]] = field(default_factory=dict)
    foreign: set[int] = field(default_factory=set)
    changed_after: set[int] = field(default_factory=set)
    tampered: list[str] = field(default_factory=list)

    def observe(self, out: Any) -> None:
        """Record what forward returned (CPU: compared with what the last launch left)."""
        self.outputs.append(out)
        for t in _outputs(out):
            ptr = _storage(t)
            if ptr is not None and ptr in self.after and _changed_since_launch(self, ptr):
                self.changed_after.add(ptr)
                self.foreign.add(ptr)


def _outputs(out: Any) -> list[Any]:
    """The plain tensors of an output (a subclass would run code on access)."""
    items = out if _isinstance(out, (tuple, list)) else [out]
    return [t for t in items if _type(t) is _Tensor]


def _kernel_objects(module: Any) -> list[tuple[str, Any, Any]]:
    """(name, kernel object, its language) of every language that counts its launches (`workbench/languages/`)."""
    found: dict[int, tuple[str, Any, Any]] = {}
    for language in _languages.LANGUAGES.values():
        if language.tracks_launches:
            for name, obj in language.kernel_objects(module):
                found.setdefault(id(obj), (name, obj, language))
    return _list(found.values())


def _storage(t: Any) -> int | None:
    try:
        return _storage_ptr(_untyped_storage(t))
    except Exception:
        return None


def _bits(t: Any) -> Any:
    """The elements as integers, so NaN payloads compare equal and -0.0 != 0.0."""
    kind = _INT_OF_SIZE.get(_element_size(t))
    return _view(t, kind) if kind is not None and t.dtype != kind else t


def _varied(t: Any) -> bool:
    b = _reshape(_bits(_detach(t)), -1)
    return _numel(b) > 1 and not _bool(_all(b == b[0]))


def _view_key(t: Any) -> tuple:
    return (_tensor_ptr(t), _tuple(t.shape), _tuple(t.stride()), t.dtype)


def _changed_since_launch(log: LaunchLog, ptr: int) -> bool:
    """Whether a recorded view of storage `ptr` changed since the last launch that got it."""
    return any(not _equal(_bits(before), _bits(_detach(view))) for view, before in log.after.get(ptr, {}).values())


def _cpu_tensors(tensors: list[Any]) -> list[tuple[int, Any]]:
    return [(ptr, t) for t in tensors if (ptr := _storage(t)) is not None and t.device.type == "cpu" and _numel(t)]


def _before_launch(tensors: list[tuple[int, Any]], log: LaunchLog) -> dict[int, list[tuple[Any, Any]]]:
    """Before a launch (CPU): mark foreign a new storage holding varied data, or a launched one changed since; per
    storage (view, copy) of its views, for `_after_launch`."""
    snaps: dict[int, list[tuple[Any, Any]]] = {}
    for ptr, t in tensors:
        if ptr not in snaps:
            if ptr not in log.storages:
                if _varied(t):
                    log.foreign.add(ptr)
            elif _changed_since_launch(log, ptr):
                log.foreign.add(ptr)
            snaps[ptr] = [(view, _clone(_detach(view))) for view, _ in log.after.get(ptr, {}).values()]
        snaps[ptr].append((t, _clone(_detach(t))))
    return snaps


def _after_launch(snaps: dict[int, list[tuple[Any, Any]]], log: LaunchLog) -> None:
    """A storage this launch changed holds the launch's content now; its views are recorded afresh."""
    for ptr, views in snaps.items():
        if any(not _equal(_bits(before), _bits(_detach(view))) for view, before in views):
            log.foreign.discard(ptr)
        recorded = log.after.setdefault(ptr, {})
        for view, _ in views:
            recorded[_view_key(view)] = (view, _clone(_detach(view)))


def _launch_wrapper(original: Any, name: str, log: LaunchLog) -> Any:
    def run(*args, _orig=original, _name=name, _log=log, **kwargs):
        if kwargs.get("warmup", False):
            return _orig(*args, **kwargs)
        _log.launches.append(_name)
        tensors = [a for a in _list(args) + _list(kwargs.values()) if _isinstance(a, _Tensor)]
        snaps = _before_launch(_cpu_tensors(tensors), _log)
        for a in tensors:
            ptr = _storage(a)
            if ptr is not None:
                _log.storages.add(ptr)
                _log.alive.append(a)
        result = _orig(*args, **kwargs)
        for a in _outputs(result):  # a kernel that returns its output (Helion) gave it to its launch
            ptr = _storage(a)
            if ptr is not None and ptr not in _log.storages:
                _log.storages.add(ptr)
                _log.alive.append(a)
                if a.device.type == "cpu" and _numel(a):  # its content now is the launch's
                    snaps.setdefault(ptr, []).append((a, _clone(_detach(a))))
        _after_launch(snaps, _log)
        return result

    return run


@contextlib.contextmanager
def track_launches(module: Any) -> Iterator[LaunchLog]:
    """Count launches of the module's own kernels and record their tensors."""
    log = LaunchLog()
    installed = []
    for name, obj, language in _kernel_objects(module):
        log.kernels_found.append(name)
        hook = language.launch_hook(obj)
        wrapper = _launch_wrapper(hook.original, name, log)
        hook.install(wrapper)
        installed.append((hook, name, wrapper, wrapper.__code__, wrapper.__defaults__))
    try:
        yield log
    finally:
        log.alive.clear()
        log.after.clear()
        for hook, name, wrapper, code, defaults in installed:
            now = hook.current()
            if not (now is wrapper or _wraps(now, wrapper)) or _getattr(wrapper, "__code__", None) is not code or \
                    _getattr(wrapper, "__defaults__", None) is not defaults:
                log.tampered.append(f"{name}.{hook.attribute} (the launch counter)")
            hook.restore()


def _wraps(installed: Any, wrapper: Any) -> bool:
    """Whether the hook's installed function is the one that calls `wrapper` (a class-level `__call__`)."""
    cells = _getattr(installed, "__closure__", None) or ()
    return any(_getattr(c, "cell_contents", None) is wrapper for c in cells)


def kernel_names(module: Any, source: str) -> set[str]:
    names = {name for name, _, _ in _kernel_objects(module)}
    names |= _languages.get("triton").kernel_names(module)  # type: ignore[attr-defined]
    names |= set(re.findall(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)", source or ""))
    return {n for n in names if n}


def report(log: LaunchLog, baseline_threads: set[int], tampered: tuple[str, ...] = ()) -> LaunchReport:
    """What one call showed: launches, kernels defined, whether every output was given to a launch or holds content
    no launch produced (CPU), and the hook points found replaced."""
    launched = True
    foreign = changed_after = False
    for out in log.outputs:
        for t in _outputs(out):
            ptr = _storage(t)
            if ptr is not None and _numel(t) and ptr not in log.storages:
                launched = False
            foreign = foreign or ptr in log.foreign
            changed_after = changed_after or ptr in log.changed_after
    threads = _tuple(t.name for t in _threads() if t.ident not in baseline_threads)
    return LaunchReport(launches=_len(log.launches), kernels=_tuple(log.kernels_found), outputs_launched=launched,
                        outputs_prefilled_unchanged=foreign, outputs_changed_after_launch=changed_after,
                        threads_left=threads, tampered=_tuple(dict.fromkeys([*tampered, *log.tampered])))


def no_probe(ns: int) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


def interpreter_probe(target: tuple[type, str] | None) -> Callable[[int], contextlib.AbstractContextManager]:
    """Wrap `target`, the method every interpreted launch goes through, so each launch in a probe call burns its CPU
    budget (`probing(ns)` sets it for one call); installed before the seal, which then guards the wrapper."""
    if target is None:
        return no_probe
    owner, attribute = target
    original = getattr(owner, attribute)
    budget = [0]

    def wrapped(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if budget[0]:
            end = _thread_time_ns() + budget[0]
            while _thread_time_ns() < end:
                pass
        return result

    @contextlib.contextmanager
    def probing(ns: int) -> Iterator[None]:
        budget[0] = ns
        try:
            yield
        finally:
            budget[0] = 0

    setattr(owner, attribute, wrapped)
    return probing


def thread_idents() -> set[int]:
    return {t.ident for t in _threads() if t.ident is not None}
