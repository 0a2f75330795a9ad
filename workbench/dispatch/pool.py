"""The caller's judges: a few per device, each busy with one job, so one candidate loads while another is timed (each
judge times under the exclusive device lock, `judge/device_lock.py`). How many: `KWB_JUDGES`, else on a GPU one per
CORES_PER_GPU_JUDGE cores within [2, MAX_GPU_JUDGES] (each judge's timing pool shrinks with their number), and 1 on
the CPU, where the interpreter and the timing share the cores. Judges start on demand, or ahead with `prestart`.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from workbench.dispatch import gpus
from workbench.dispatch.judges import Judge, JudgeDied
from workbench.dispatch.progress import CancelToken, ProgressRelay
from workbench.errors import WorkbenchError, WorkerError
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


_POOL: dict[str, list[Judge]] = {}  # per place: "cpu" or one GPU, "cuda:N"
_BUSY: set[Judge] = set()
_ALONE: dict[str, Judge] = {}  # a GPU given to one judge alone (memory admission, `_run_alone`)
_WAITING_ALONE: set[Judge] = set()  # busy judges waiting for their GPU alone (they run nothing meanwhile)
_COND = threading.Condition()


def _key(device: str) -> str:
    """The place of a pinned device: "cpu", or "cuda:N" ("cuda" alone is GPU 0 where one place is needed)."""
    if not device.startswith("cuda"):
        return "cpu"
    return device if ":" in device else "cuda:0"


def places(device: str, devices: Sequence[str] | None = None) -> list[str]:
    """Where an evaluation on `device` may run: the CPU; one pinned GPU ("cuda:N"); or, for "cuda", any GPU of
    `devices` (None: KWB_GPUS, else every visible one)."""
    if not device.startswith("cuda"):
        return ["cpu"]
    if ":" in device:
        return [device]
    return gpus.chosen(devices) or ["cuda:0"]


def judge_slots(device: str) -> int:
    """How many judges one place of the device mode may have (module doc): per GPU on a GPU machine."""
    raw = os.environ.get("KWB_JUDGES", "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise WorkbenchError(f"KWB_JUDGES must be a whole number of judges (1 or more), not {raw!r}") from None
        if value < 1:
            raise WorkbenchError(f"KWB_JUDGES must be 1 or more, not {value}")
        return value
    if device.startswith("cuda"):
        cores = _usable_cores()
        return gpu_judges(cores // max(1, gpus.visible_count()) if cores else cores)
    return DEFAULT_SLOTS["cpu"]


def total_slots(device: str, devices: Sequence[str] | None = None) -> int:
    """Judges that may work at once for `device` over all its places (every chosen GPU's judges)."""
    return judge_slots(device) * len(places(device, devices))


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()


def _start(place: str) -> Judge:
    try:
        return Judge(place, judge_slots(place))
    except OSError as exc:  # pragma: no cover
        raise WorkerError(f"could not start an evaluation judge: {exc}") from exc


def _live(place: str) -> list[Judge]:
    """The judges of a place without its dead idle ones (a busy one is dropped by its job); _COND held."""
    pool = _POOL.setdefault(place, [])
    pool[:] = [j for j in pool if j.alive() or j in _BUSY]
    return pool


def judges(device: str) -> list[Judge]:
    """The judges of `device` now (busy or not): of one place, or of every GPU for "cuda"."""
    with _COND:
        if device == "cuda":
            return [j for place, pool in _POOL.items() if place.startswith("cuda") for j in pool]
        return list(_POOL.get(_key(device), []))


def occupancy(device: str, devices: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
    """Per place of `device`: (busy judges, judges allowed), for progress lines."""
    slots = judge_slots(device)
    with _COND:
        return {place: (sum(j in _BUSY for j in _POOL.get(place, [])), slots) for place in places(device, devices)}


def get_judge(device: str) -> Judge:
    """An idle judge of the device's place (started if none), not reserved: for tests and diagnostics."""
    place = _key(device)
    with _COND:
        pool = _live(place)
        idle = [j for j in pool if j not in _BUSY]
        if idle:
            return idle[0]
        judge = _start(place)
        pool.append(judge)
        return judge


def prestart(device: str, count: int | None = None, devices: Sequence[str] | None = None) -> int:
    """Start judges up to `count` over the device's places (default: all their slots), spread evenly, without
    waiting for them; returns how many there are now. Their imports overlap whatever the caller does next."""
    where = places(device, devices)
    slots = judge_slots(device)
    want = min(slots * len(where), count if count is not None else slots * len(where))
    with _COND:
        pools = {place: _live(place) for place in where}
        while sum(map(len, pools.values())) < want:
            place = min(where, key=lambda p: len(pools[p]))
            if len(pools[place]) >= slots:
                break
            pools[place].append(_start(place))
        return sum(map(len, pools.values()))


def _choose(where: list[str], slots: int) -> tuple[str, Judge | None] | None:
    """The place for the next evaluation (_COND held): the least busy GPU that has an idle judge or room for one,
    an idle started judge before a new one; None while every place is full, given to one judge alone, or waited for
    by one (new work there would keep it waiting without end)."""
    waited_for = {j.device for j in _WAITING_ALONE}
    options: list[tuple[tuple[int, int, int], str, Judge | None]] = []
    for order, place in enumerate(where):
        if place in _ALONE or place in waited_for:
            continue
        pool = _live(place)
        idle = sorted((j for j in pool if j not in _BUSY), key=lambda j: not j.ready)
        busy = len(pool) - len(idle)
        if idle:
            options.append(((busy, 0 if idle[0].ready else 1, order), place, idle[0]))
        elif len(pool) < slots:
            options.append(((busy, 2, order), place, None))
    if not options:
        return None
    _, place, judge = min(options, key=lambda o: o[0])
    return place, judge


def _acquire(device: str, relay: ProgressRelay, devices: Sequence[str] | None = None) -> Judge:
    """Reserve a judge on the least busy place of `device` (`_choose`), starting one where there is room, else wait
    for the first that becomes free. Cancel and Ctrl-C are honoured while waiting."""
    where = places(device, devices)
    slots = judge_slots(device)
    with _COND:
        while True:
            chosen = _choose(where, slots)
            if chosen is not None:
                place, judge = chosen
                if judge is None:
                    judge = _start(place)
                    _POOL[place].append(judge)
                _BUSY.add(judge)
                return judge
            _COND.wait(WAIT_STEP)
            relay.check_cancel()


def _release(judge: Judge) -> None:
    with _COND:
        _BUSY.discard(judge)
        _COND.notify_all()


def _forget(judge: Judge, successor: bool) -> None:
    """Kill `judge` and drop it; with `successor`, start its replacement now so the next evaluation need not wait."""
    judge.kill()
    with _COND:
        pool = _POOL.get(judge.device, [])
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
    """Kill and forget every judge of the device's place ("cuda": of every GPU), e.g. after a cheat patched one."""
    with _COND:
        doomed = [place for place in _POOL if (place.startswith("cuda") if device == "cuda" else place == _key(device))]
        pools = [_POOL.pop(place) for place in doomed]
    for pool in pools:
        for judge in pool:
            judge.kill()


def run_placed(job: wire.Job, timeout: float, on_progress: Callable[[wire.Progress], Any] | None = None,
               cancel: CancelToken | None = None, devices: Sequence[str] | None = None) -> tuple[wire.Reply, str]:
    """Run one job on a judge of the least busy place of its device: (Reply, place). A judge that dies mid-job is
    replaced and the job run once more; a second death or a hang is a "crashed"/"timeout" Reply; a cancel ends the busy
    judge."""
    relay = ProgressRelay(on_progress, cancel)
    for attempt in (1, 2):
        judge = _acquire(job.device, relay, devices)
        sent = dataclasses.replace(job, device=judge.job_device)
        try:
            reply = judge.request(sent, timeout, relay)
            if _crowded_out(judge, reply):
                reply = _run_alone(judge, sent, timeout, relay)
            break
        except JudgeDied as died:
            if not judge.ready:  # no candidate code ran: the environment is broken, not the kernel
                _forget(judge, successor=False)
                raise WorkerError(
                    f"the evaluation judge could not start ({died.detail}). Run `kwb doctor`, and check that "
                    f"`{sys.executable} -m workbench.eval.judge.main` imports torch and triton.\n"
                    f"Last judge output:\n{died.log}") from None
            _forget(judge, successor=True)
            if died.kind == "crashed" and attempt == 1:
                continue  # the judge (trusted, not the candidate's process) died: once more on a fresh judge
            reply = wire.Reply(status=died.kind, died=died.detail, log=died.log, judge_pid=judge.pid)
            return reply, judge.device
        except KeyboardInterrupt:  # the user is stopping: end the busy judge; the next evaluation starts one
            _forget(judge, successor=False)
            raise
        except BaseException:
            _forget(judge, successor=True)
            raise
    if attempt == 2:
        reply.diagnostics.judge_restarted = "its first judge died mid-evaluation; evaluated again on a fresh judge"
    kept = _in_pool(judge)
    if judge.jobs >= MAX_JOBS_PER_JUDGE or not kept:
        _forget(judge, successor=kept)
    else:
        _release(judge)
    return reply, judge.device


def _crowded_out(judge: Judge, reply: wire.Reply) -> bool:
    """The judge or its candidate ran out of GPU memory while other judges shared the GPU: their memory, not the task,
    may be why."""
    if not judge.device.startswith("cuda") or not reply.diagnostics.out_of_memory:
        return False
    with _COND:
        return any(other is not judge for other in _POOL.get(judge.device, []))


def _run_alone(judge: Judge, job: wire.Job, timeout: float, relay: ProgressRelay) -> wire.Reply:
    """Memory admission: evaluate `job` again with the GPU to this judge alone (other judges idle or ended, new
    evaluations kept off it); a task that still does not fit gets "does not fit"."""
    place = judge.device
    with _COND:
        _WAITING_ALONE.add(judge)
        _COND.notify_all()
        try:
            while place in _ALONE or any(j in _BUSY and j is not judge and j not in _WAITING_ALONE
                                         for j in _POOL.get(place, [])):
                _COND.wait(WAIT_STEP)
                relay.check_cancel()
        finally:
            _WAITING_ALONE.discard(judge)
        _ALONE[place] = judge
        pool = _POOL.get(place, [])
        idle = [j for j in pool if j is not judge and j not in _BUSY]
        pool[:] = [j for j in pool if j not in idle]
        waiting = len(pool) - 1
    try:
        for other in idle:
            other.kill()
        reply = judge.request(job, timeout, relay)
    finally:
        with _COND:
            _ALONE.pop(place, None)
            _COND.notify_all()
    reply.diagnostics.gpu_alone = (f"ran out of memory beside {len(idle) + waiting} other judge(s) of {place}; "
                                   f"evaluated again with the GPU to itself ({len(idle)} idle judge(s) ended)")
    return reply


def _in_pool(judge: Judge) -> bool:
    with _COND:
        return judge in _POOL.get(judge.device, [])


def shutdown_judges() -> None:
    with _COND:
        pools = list(_POOL.values())
        _POOL.clear()
        _BUSY.clear()
        _ALONE.clear()
        _WAITING_ALONE.clear()
    for pool in pools:
        for judge in pool:
            judge.close()


#: Older names, still imported by callers and tests.
discard_worker, shutdown_workers = discard_judge, shutdown_judges

atexit.register(shutdown_judges)
