"""The caller's judges: a few per device mode, each busy with one job at a time, so one candidate loads and compiles
while another is timed. Each judge holds the device lock (`judge/device_lock.py`) exclusively while it times, so no
timed batch shares the device with other work.

How many: `KWB_JUDGES`, else on a GPU one per CORES_PER_GPU_JUDGE cores, between 2 and MAX_GPU_JUDGES (more keep the
GPU busier while each has cores for its runner, but every judge's timing pool shrinks with their number), and 1 on
the CPU, where the interpreter and the timing share the cores. Judges start on demand, or ahead with `prestart`.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from workbench.errors import WorkbenchError, WorkerError
from workbench.eval.caller.judges import Judge, JudgeDied
from workbench.eval.caller.progress import CancelToken, ProgressRelay
from workbench.eval.wire import judge_messages as wire

#: A judge is replaced after this many evaluations, so caches of old tasks cannot grow without bound.
MAX_JOBS_PER_JUDGE = 200
#: Judges per device mode when KWB_JUDGES is not set (on a GPU, `gpu_judges` of the machine's cores).
DEFAULT_SLOTS = {"cuda": 2, "cpu": 1}
#: Most judges a GPU gets by default, and CPU cores each one needs (its own work and its runner's).
MAX_GPU_JUDGES, CORES_PER_GPU_JUDGE = 4, 4
#: Seconds between looks for a free judge while every one is busy.
WAIT_STEP = 0.1


def gpu_judges(cores: int | None) -> int:
    """Judges for one GPU on a machine of `cores` CPU cores (module doc)."""
    return max(DEFAULT_SLOTS["cuda"], min(MAX_GPU_JUDGES, (cores or 0) // CORES_PER_GPU_JUDGE))


_POOL: dict[str, list[Judge]] = {}
_BUSY: set[Judge] = set()
_COND = threading.Condition()


def _key(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def judge_slots(device: str) -> int:
    """How many judges the device mode may have (module doc)."""
    raw = os.environ.get("KWB_JUDGES", "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise WorkbenchError(f"KWB_JUDGES must be a whole number of judges (1 or more), not {raw!r}") from None
        if value < 1:
            raise WorkbenchError(f"KWB_JUDGES must be 1 or more, not {value}")
        return value
    if _key(device) == "cuda":
        return gpu_judges(_usable_cores())
    return DEFAULT_SLOTS["cpu"]


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()


def _start(device: str) -> Judge:
    try:
        return Judge(device, judge_slots(device))
    except OSError as exc:  # pragma: no cover
        raise WorkerError(f"could not start an evaluation judge: {exc}") from exc


def _live(key: str) -> list[Judge]:
    """The pool of a device mode without its dead idle judges (a busy one is dropped by its job); _COND held."""
    pool = _POOL.setdefault(key, [])
    pool[:] = [j for j in pool if j.alive() or j in _BUSY]
    return pool


def judges(device: str) -> list[Judge]:
    """The device mode's judges now (busy or not)."""
    with _COND:
        return list(_POOL.get(_key(device), []))


def get_judge(device: str) -> Judge:
    """An idle judge of the device mode (started when there is none); not reserved: for callers that drive one
    judge by hand (tests, diagnostics)."""
    with _COND:
        pool = _live(_key(device))
        idle = [j for j in pool if j not in _BUSY]
        if idle:
            return idle[0]
        judge = _start(device)
        pool.append(judge)
        return judge


def prestart(device: str, count: int | None = None) -> int:
    """Start judges up to `count` (default: the device's slots) without waiting for them; returns how many the device
    mode has now. Their imports overlap whatever the caller does next."""
    want = min(judge_slots(device), count if count is not None else judge_slots(device))
    with _COND:
        pool = _live(_key(device))
        while len(pool) < want:
            pool.append(_start(device))
        return len(pool)


def _acquire(device: str, relay: ProgressRelay) -> Judge:
    """Reserve a judge: an idle one (a started one first), a new one while the pool has room, else the first that
    becomes free. Cancel and Ctrl-C are honoured while waiting."""
    key = _key(device)
    slots = judge_slots(device)
    with _COND:
        while True:
            pool = _live(key)
            idle = sorted((j for j in pool if j not in _BUSY), key=lambda j: not j.ready)
            judge = idle[0] if idle else None
            if judge is None and len(pool) < slots:
                judge = _start(device)
                pool.append(judge)
            if judge is not None:
                _BUSY.add(judge)
                return judge
            _COND.wait(WAIT_STEP)
            relay.check_cancel()


def _release(judge: Judge) -> None:
    with _COND:
        _BUSY.discard(judge)
        _COND.notify_all()


def _forget(judge: Judge, successor: bool) -> None:
    """Kill `judge` and drop it from the pool; with `successor`, start its replacement now, so the next evaluation
    after a crash or a cancel does not wait for its imports."""
    judge.kill()
    with _COND:
        pool = _POOL.get(_key(judge.device), [])
        if judge in pool:
            pool.remove(judge)
        if successor:
            try:
                pool.append(Judge(judge.device, judge_slots(judge.device)))
            except OSError:  # pragma: no cover - the next _acquire retries and reports
                pass
        _BUSY.discard(judge)
        _COND.notify_all()


def discard_judge(device: str) -> None:
    """Kill and forget every judge of the device mode (after a cheat patched one, or for a changed environment)."""
    with _COND:
        pool = _POOL.pop(_key(device), [])
    for judge in pool:
        judge.kill()


def run_job(job: wire.Job, timeout: float, on_progress: Callable[[wire.Progress], Any] | None = None,
            cancel: CancelToken | None = None) -> wire.Reply:
    """Run one job on a judge of its device. A dead or hung judge becomes a "timeout"/"crashed" Reply; a cancel or
    anything raised while waiting propagates, and the busy judge is ended (replaced at once, except after Ctrl-C)."""
    relay = ProgressRelay(on_progress, cancel)
    judge = _acquire(job.device, relay)
    try:
        reply = judge.request(job, timeout, relay)
    except JudgeDied as died:
        if not judge.ready:  # no candidate code ran: the environment is broken, not the kernel
            _forget(judge, successor=False)
            raise WorkerError(
                f"the evaluation judge could not start ({died.detail}). Run `kwb doctor`, and check that "
                f"`{sys.executable} -m workbench.eval.judge.main` imports torch and triton.\n"
                f"Last judge output:\n{died.log}") from None
        _forget(judge, successor=True)
        return wire.Reply(status=died.kind, died=died.detail, log=died.log, judge_pid=judge.pid)
    except KeyboardInterrupt:  # the user is stopping: end the busy judge; the next evaluation starts one
        _forget(judge, successor=False)
        raise
    except BaseException:
        _forget(judge, successor=True)
        raise
    kept = _in_pool(judge)
    if judge.jobs >= MAX_JOBS_PER_JUDGE or not kept:
        _forget(judge, successor=kept)
    else:
        _release(judge)
    return reply


def _in_pool(judge: Judge) -> bool:
    with _COND:
        return judge in _POOL.get(_key(judge.device), [])


def shutdown_judges() -> None:
    with _COND:
        pools = list(_POOL.values())
        _POOL.clear()
        _BUSY.clear()
    for pool in pools:
        for judge in pool:
            judge.close()


#: Older names, still imported by callers and tests.
discard_worker, shutdown_workers = discard_judge, shutdown_judges

atexit.register(shutdown_judges)
