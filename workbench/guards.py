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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.findings import Finding

#: The candidate's own kernels must account for at least this share of GPU kernel time in one forward.
COVERAGE_THRESHOLD = 0.5


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

    def observe(self, out: Any) -> None:
        self.outputs.append(out)


def _trusted_objects() -> dict[str, Any]:
    import torch

    from workbench import check, timing

    objs = {
        "time.perf_counter": time.perf_counter, "time.perf_counter_ns": time.perf_counter_ns, "time.time": time.time,
        "time.monotonic": time.monotonic, "torch.allclose": torch.allclose, "torch.equal": torch.equal,
        "torch.isfinite": torch.isfinite, "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "torch.testing.assert_close": torch.testing.assert_close, "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event, "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "workbench.check.run_correctness": check.run_correctness, "workbench.check.compare": check.compare,
        "workbench.timing.measure": timing.measure, "workbench.timing.summarize": timing.summarize,
        "workbench.guards.verify_trusted": verify_trusted, "workbench.guards.check_launches": check_launches,
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


@contextlib.contextmanager
def track_launches(module: Any) -> Iterator[LaunchLog]:
    """Count launches of the module's own Triton kernels (compiled or interpreted) and record their tensors."""
    import torch

    log = LaunchLog()
    patched = []
    for name, obj in _kernel_objects(module):
        log.kernels_found.append(name)
        original = obj.__dict__.get("run")

        def run(*args, _orig=obj.run, _name=name, **kwargs):
            if not kwargs.get("warmup", False):
                log.launches.append(_name)
                for a in list(args) + list(kwargs.values()):
                    if isinstance(a, torch.Tensor):
                        ptr = _storage(a)
                        if ptr is not None:
                            log.storages.add(ptr)
            return _orig(*args, **kwargs)

        obj.run = run
        patched.append((obj, original))
    try:
        yield log
    finally:
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
    return []


def thread_baseline() -> int:
    return threading.active_count()


def check_threads(baseline: int) -> list[Finding]:
    now = threading.active_count()
    if now > baseline:
        names = [t.name for t in threading.enumerate()][-(now - baseline):]
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
