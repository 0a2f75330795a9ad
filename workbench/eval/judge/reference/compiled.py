"""`torch.compile` of the reference (the timing's compiled line, an aside no verdict uses), made in a background thread
while the candidate loads and is checked, holding the device shared through its own lock (`DeviceLock.companion`)
and keeping the switch interval short (`main_thread_first`) so the main thread still answers the runner promptly."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from workbench.eval.judge.device_lock import SHARED, DeviceLock

if TYPE_CHECKING:
    from workbench.eval.judge.evaluation import Evaluation

#: Seconds the timing stage waits for a compile still running before it times without the compiled line.
WAIT_S = 600.0
#: A compile's first call holds about this many input sets' bytes at its peak (inputs, output, intermediates).
BESIDE_FACTOR = 8
#: The interpreter's switch interval while a compile runs beside the main thread.
COMPILE_SWITCH_S = 0.0005

_switch_guard = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


@contextmanager
def main_thread_first() -> Iterator[None]:
    """A short switch interval for the block; the one in force before overlapping blocks comes back after them."""
    global _switch_users, _switch_saved
    with _switch_guard:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, COMPILE_SWITCH_S))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_guard:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


@contextmanager
def beside_the_judge(device: str, lock: DeviceLock | None) -> Iterator[None]:
    """For the block, in a background thread: `device` current, the device held shared through the thread's own
    lock description, the GIL handed to the main thread first."""
    own = lock.companion() if lock is not None else None
    try:
        if device.startswith("cuda") and torch.device(device).index is not None:
            torch.cuda.set_device(torch.device(device))
        with own.hold(SHARED) if own is not None else nullcontext(), main_thread_first():
            yield
    finally:
        if own is not None:
            own.close()


@dataclass
class CompileJob:
    """One background compile: the compiled callable, or None and a note saying why not."""

    compiled: Any = None
    note: str = ""
    seconds: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def finished(cls, compiled: Any, note: str, seconds: float = 0.0) -> CompileJob:
        job = cls(compiled=compiled, note=note, seconds=seconds)
        job.done.set()
        return job

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def take(self, timeout: float = WAIT_S) -> tuple[Any, str, float]:
        """(compiled callable or None, note, seconds spent waiting for it)."""
        started = time.perf_counter()
        if not self.done.wait(timeout):
            return None, (f"torch.compile of the reference was still running after {timeout:g} s; compiled line "
                          "omitted"), time.perf_counter() - started
        return self.compiled, self.note, time.perf_counter() - started


def compile_reference(model: Any, inputs: list[Any]) -> tuple[Any, str]:
    """`torch.compile(model)`, compiled by a first call on `inputs`; (callable, "") or (None, why)."""
    try:
        fn = torch.compile(model)
        with torch.no_grad():
            fn(*inputs)
        return fn, ""
    except Exception as exc:  # noqa: BLE001 - the compiled line is an aside: its failure is a note
        return None, f"torch.compile of the reference failed ({type(exc).__name__}); compiled line omitted"


def fits_beside(set_bytes: int, free: int | None) -> bool:
    """Whether a compile's first call (BESIDE_FACTOR x an input set) fits in a quarter of the free memory, so the
    correctness rounds beside it cannot run out of memory. Unknown free memory: no."""
    return free is not None and free > 0 and set_bytes > 0 and BESIDE_FACTOR * set_bytes <= free // 4


def start(model: Any, inputs: list[Any], device: str, lock: DeviceLock | None,
          compile_fn: Callable[[Any, list[Any]], tuple[Any, str]] = compile_reference) -> CompileJob:
    """Compile `model` on `inputs` (drawn by the main thread) in a daemon thread holding the device shared; the job."""
    job = CompileJob()

    def work() -> None:
        started = time.perf_counter()
        try:
            with beside_the_judge(device, lock):
                job.compiled, job.note = compile_fn(model, inputs)
        except Exception as exc:  # noqa: BLE001 - drawing the inputs or taking the lock failed: still only a note
            job.compiled, job.note = None, (f"torch.compile of the reference failed ({type(exc).__name__}: "
                                            f"{str(exc)[:200]}); compiled line omitted")
        finally:
            job.seconds = time.perf_counter() - started
            job.done.set()

    threading.Thread(target=work, name="kwb-reference-compile", daemon=True).start()
    return job


def start_for(ev: Evaluation) -> None:
    """Start compiling the reference once per task, size and seed; not for one that draws random numbers (it would
    move the RNG under the seeded rounds), nor where it might not fit beside the check (compiled before timing)."""
    key = ev.timing_key
    if not ev.wants_compiled() or ev.plan is None or key in ev.ctx.compiled or ev.plan.seeded:
        return
    from workbench.eval.judge.timing.inputs import free_bytes

    if not fits_beside(ev.plan.pool.set_bytes, free_bytes(ev.device)):
        return
    with ev.hold_device(SHARED):
        inputs = ev.sample_inputs()
    ev.compile_job = start(ev.reference_model(), inputs, ev.device, ev.ctx.device_lock)
    ev.ctx.compiled[key] = ev.compile_job


def take_for_timing(ev: Evaluation) -> Any:
    """The compiled reference for `ev`'s timing (None when it failed): the background compile's, waited for holding
    no lock (another judge's timing may be ahead of it), else compiled now under a shared hold."""
    key = ev.timing_key
    job = ev.ctx.compiled.get(key)
    if job is None:
        started = time.perf_counter()
        with ev.hold_device(SHARED):
            fn, note = compile_reference(ev.reference_model(), ev.sample_inputs())
        job = ev.ctx.compiled[key] = ev.compile_job = CompileJob.finished(fn, note, time.perf_counter() - started)
        how = "made before the timing"
    else:
        how = "made beside the load and check" if job is ev.compile_job else "made earlier in this judge"
    fn, note, waited = job.take()
    if note:
        ev.notes.append(note if job is ev.compile_job else
                        "torch.compile of the reference failed earlier in this judge; compiled line omitted")
    ev.diagnostics.reference_compile = {"how": how, "seconds": round(job.seconds, 3), "waited": round(waited, 3)}
    return fn
