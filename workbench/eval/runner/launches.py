"""Launch tracking in the runner: which of the candidate's own Triton kernels ran during a call, which tensors they
were given, and (on the CPU, where no profiler sees kernels) whether a launch changed the output it was given.

This runs in the untrusted runner next to candidate code, so what it reports is data for the judge, not a verdict:
a candidate that tampers with it can only make its own report wrong, and the judge also checks coverage, outputs
and times on its own side. The judge's reading of a report is `guards.judge_launches`.
"""

from __future__ import annotations

import contextlib
import re
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.eval.wire.runner_messages import LaunchReport


@dataclass
class LaunchLog:
    """Launches of the candidate's own kernels seen while the tracker was active, and the tensors they got."""

    launches: list[str] = field(default_factory=list)
    storages: set[int] = field(default_factory=set)
    outputs: list[Any] = field(default_factory=list)
    kernels_found: list[str] = field(default_factory=list)
    #: Tensors given to launches, held until the call ends: a freed scratch buffer's address cannot be handed
    #: to the output, which would make an output the kernels never saw look launched-on.
    alive: list[Any] = field(default_factory=list)
    #: CPU storages whose bytes some launch changed, and those that held varied data before the first launch
    #: that got them (an output computed elsewhere, then passed to a kernel that leaves it alone).
    written: set[int] = field(default_factory=set)
    prefilled: set[int] = field(default_factory=set)
    #: Shared by every call of one candidate module: calls whose prefilled output a launch did change. An honest
    #: kernel may leave a prefilled output unchanged on some inputs (ReLU in place on a clone of all-positive
    #: data), never on all of them.
    history: dict[str, int] = field(default_factory=dict)

    def observe(self, out: Any) -> None:
        import torch

        self.outputs.append(out)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            ptr = _storage(t) if type(t) is torch.Tensor else None  # a subclass would run code on access
            if ptr is not None and ptr in self.prefilled and ptr in self.written:
                self.history["rewritten"] = self.history.get("rewritten", 0) + 1


def _kernel_objects(module: Any) -> list[tuple[str, Any]]:
    """Triton kernel objects (jit, autotune, heuristics wrappers) in the module's globals and classes."""
    try:
        from triton.runtime.jit import KernelInterface
    except Exception:  # pragma: no cover - triton missing
        return []
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    spaces = [vars(module)] + [vars(v) for v in vars(module).values() if isinstance(v, type)]
    for space in spaces:
        for name, obj in list(space.items()):
            if isinstance(obj, KernelInterface) and id(obj) not in seen:
                seen.add(id(obj))
                found.append((name, obj))
    return found


def _storage(t: Any) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


#: Per candidate module: see LaunchLog.history.
_HISTORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _bits(t: Any) -> Any:
    """The tensor's elements reinterpreted as integers, so NaN payloads compare equal and -0.0 != 0.0."""
    import torch

    kind = _BITS.get(t.element_size())
    return t.view(getattr(torch, kind)) if kind and t.dtype != getattr(torch, kind) else t


def _varied(t: Any) -> bool:
    b = _bits(t.detach()).reshape(-1)
    return b.numel() > 1 and not bool((b == b[0]).all())


def _snapshot_cpu(tensors: list[Any], log: LaunchLog) -> list[tuple[int, Any, Any]]:
    """(storage, tensor, copy) of the CPU tensors a launch gets; on the CPU the copies are cheap (interpreter
    sizes) and the profiler that checks GPU launches does not exist, so writes are checked by content."""
    snaps = []
    for t in tensors:
        ptr = _storage(t)
        if ptr is None or t.device.type != "cpu" or not t.numel():
            continue
        if ptr not in log.storages and _varied(t):
            log.prefilled.add(ptr)
        snaps.append((ptr, t, t.detach().clone()))
    return snaps


@contextlib.contextmanager
def track_launches(module: Any) -> Iterator[LaunchLog]:
    """Count launches of the module's own Triton kernels (compiled or interpreted) and record their tensors."""
    import torch

    log = LaunchLog(history=_HISTORY.setdefault(module, {}))
    patched = []
    for name, obj in _kernel_objects(module):
        log.kernels_found.append(name)
        original = obj.__dict__.get("run")

        def run(*args, _orig=obj.run, _name=name, **kwargs):
            if kwargs.get("warmup", False):
                return _orig(*args, **kwargs)
            log.launches.append(_name)
            tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
            snaps = _snapshot_cpu(tensors, log)
            for a in tensors:
                ptr = _storage(a)
                if ptr is not None:
                    log.storages.add(ptr)
                    log.alive.append(a)
            result = _orig(*args, **kwargs)
            for ptr, t, before in snaps:
                if ptr not in log.written and not torch.equal(_bits(before), _bits(t.detach())):
                    log.written.add(ptr)
            return result

        obj.run = run
        patched.append((obj, original))
    try:
        yield log
    finally:
        log.alive.clear()
        for obj, original in patched:
            if original is None:
                obj.__dict__.pop("run", None)
            else:
                obj.run = original


def kernel_names(module: Any, source: str) -> set[str]:
    names = {name for name, _ in _kernel_objects(module)}
    for name, obj in _kernel_objects(module):
        fn = getattr(obj, "fn", None)
        while fn is not None and not hasattr(fn, "__name__"):
            fn = getattr(fn, "fn", None)
        if fn is not None:
            names.add(getattr(fn, "__name__", name))
    names |= set(re.findall(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)", source or ""))
    return {n for n in names if n}


def report(log: LaunchLog, baseline_threads: set[int]) -> LaunchReport:
    """What one call showed: launches, kernels defined, whether every returned tensor was given to a launch, and
    whether a prefilled output came back unchanged by every launch (computed elsewhere, then passed through)."""
    import torch

    launched = True
    prefilled_unchanged = False
    for out in log.outputs:
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if type(t) is not torch.Tensor:
                continue
            ptr = _storage(t)
            if ptr is not None and t.numel() and ptr not in log.storages:
                launched = False
            if ptr in log.prefilled and ptr not in log.written and not log.history.get("rewritten"):
                prefilled_unchanged = True
    threads = tuple(t.name for t in threading.enumerate() if t.ident not in baseline_threads)
    return LaunchReport(launches=len(log.launches), kernels=tuple(log.kernels_found), outputs_launched=launched,
                        outputs_prefilled_unchanged=prefilled_unchanged, threads_left=threads)


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}
