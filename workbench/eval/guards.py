"""Runtime anti-cheating guards used inside the worker (CHEATS.md rows 4, 5, 8, 9).

The worker calls them at fixed points of an evaluation:
  snap = snapshot_trusted()                 # before the candidate module is imported
  with track_launches(module) as log: ...   # around each candidate call during the correctness checks
  check_launches(log, language, device)     # -> decoy-kernel (no own launch, or output not written by one)
  baseline = thread_baseline(); ...; check_threads(baseline)   # -> thread-deferral
  verify_trusted(snap)                      # before timing and at the end -> timer-patch
  check_coverage(call, device, module, source)   # GPU: profiler share of the candidate's kernels -> low-coverage
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.eval.findings import Finding

#: The candidate's own kernels must account for at least this share of GPU kernel time in one forward.
COVERAGE_THRESHOLD = 0.5
#: Seconds check_threads waits for threads a candidate left running, so they cannot write into later work.
THREAD_DRAIN_S = 2.0

# Bound before any candidate is imported: a candidate that patches the time module cannot stretch the drain.
_monotonic = time.monotonic


@dataclass
class TrustedSnapshot:
    identities: dict[str, int] = field(default_factory=dict)


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


def _trusted_objects() -> dict[str, Any]:
    import torch

    from workbench.eval import compare, correctness, timing

    objs = {
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns, "time.time": time.time,
        "time.monotonic": time.monotonic, "torch.allclose": torch.allclose, "torch.equal": torch.equal,
        "torch.isfinite": torch.isfinite, "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "torch.testing.assert_close": torch.testing.assert_close, "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event, "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "workbench.eval.check.run_correctness": correctness.run_correctness, "workbench.eval.check.compare": compare.compare,
        "workbench.eval.timing.measure": timing.measure, "workbench.eval.timing.summarize": timing.summarize,
        "workbench.eval.guards.verify_trusted": verify_trusted, "workbench.eval.guards.check_launches": check_launches,
    }
    return objs


def snapshot_trusted() -> TrustedSnapshot:
    return TrustedSnapshot({name: id(obj) for name, obj in _trusted_objects().items()})


def verify_trusted(snapshot: TrustedSnapshot) -> list[Finding]:
    changed = [name for name, obj in _trusted_objects().items() if snapshot.identities.get(name) != id(obj)]
    if changed:
        return [Finding("timer-patch", f"replaced: {', '.join(changed)}")]
    return []


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


def check_launches(log: LaunchLog, language: str, device: str) -> list[Finding]:
    """A Triton candidate must launch its own kernel, and its output must live in memory a launch was given."""
    if language != "triton":
        return []
    if not log.launches:
        defined = ", ".join(log.kernels_found) or "none found"
        return [Finding("decoy-kernel", f"forward launched none of the candidate's Triton kernels ({defined})")]
    import torch

    for out in log.outputs:
        tensors = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
        for t in tensors:
            ptr = _storage(t)
            if ptr is not None and t.numel() and ptr not in log.storages:
                return [Finding("decoy-kernel", "the returned tensor was not passed to any of the candidate's kernel "
                                                "launches, so the kernels did not produce it")]
            if ptr in log.prefilled and ptr not in log.written and not log.history.get("rewritten"):
                return [Finding("decoy-kernel", "the returned tensor already held its values before the candidate's "
                                                "kernels got it, and no launch changed it: it was computed elsewhere")]
    return []


def thread_baseline() -> int:
    return threading.active_count()


def check_threads(baseline: int) -> list[Finding]:
    """Threads left running after forward are flagged, then given THREAD_DRAIN_S to finish: a deferred kernel
    launch from a stray thread would otherwise overlap (and, in the interpreter, corrupt) the next evaluation."""
    now = threading.active_count()
    if now > baseline:
        stray = threading.enumerate()[-(now - baseline):]
        names = [t.name for t in stray]
        deadline = _monotonic() + THREAD_DRAIN_S
        for t in stray:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - _monotonic()))
        return [Finding("thread-deferral", f"{now - baseline} thread(s) still running after forward: {', '.join(names)}")]
    return []


def _candidate_kernel_names(module: Any, source: str) -> set[str]:
    names = {name for name, _ in _kernel_objects(module)}
    for name, obj in _kernel_objects(module):
        fn = getattr(obj, "fn", None)
        while fn is not None and not hasattr(fn, "__name__"):
            fn = getattr(fn, "fn", None)
        if fn is not None:
            names.add(getattr(fn, "__name__", name))
    names |= set(re.findall(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)", source or ""))
    return {n for n in names if n}


def check_coverage(call: Callable[[], Any], device: str, module: Any, source: str = "") -> list[Finding]:
    """On a GPU, profile one forward: the candidate's kernels must take >= COVERAGE_THRESHOLD of kernel time."""
    if not device.startswith("cuda"):
        return []
    import torch
    from torch.profiler import ProfilerActivity, profile

    names = _candidate_kernel_names(module, source)
    if not names:  # a torch candidate has no kernels of its own; for the others the static checks require one
        return []
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with torch.no_grad():
            call()
        torch.cuda.synchronize()
    total = own = 0.0
    kernels = []
    for evt in prof.events():
        if getattr(evt, "device_type", None) is None or "cuda" not in str(evt.device_type).lower():
            continue
        dur = float(getattr(evt, "device_time", 0.0) or getattr(evt, "cuda_time", 0.0) or 0.0)
        if dur <= 0 or evt.name.startswith(("Memcpy", "Memset", "cudaMem")):
            continue
        total += dur
        kernels.append(evt.name)
        if any(n in evt.name for n in names):
            own += dur
    if total == 0.0:
        return [Finding("decoy-kernel", "no GPU kernel ran during forward")]
    share = own / total
    if share < COVERAGE_THRESHOLD:
        others = ", ".join(sorted({k for k in kernels if not any(n in k for n in names)})[:4])
        return [Finding("low-coverage", f"the candidate's kernels took {100 * share:.0f}% of GPU kernel time "
                                        f"(needs >= {100 * COVERAGE_THRESHOLD:.0f}%); other kernels: {others}")]
    return []
