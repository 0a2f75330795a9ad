"""The device lock judges share: a timing has the device to itself, checks share it, a waiting timing goes first."""

from __future__ import annotations

import multiprocessing as mp
import time

from workbench.eval.judge.device_lock import EXCLUSIVE, NONE, SHARED, DeviceLock


def _hold(folder: str, mode: int, seconds: float, events, name: str, ready=None) -> None:
    lock = DeviceLock("cpu", folder)
    if ready is not None:
        ready.wait()
    with lock.hold(mode):
        events.put((name, "in", time.monotonic()))
        time.sleep(seconds)
        events.put((name, "out", time.monotonic()))


def _run(folder: str, plan: list[tuple[str, int, float, str | float]]) -> dict[tuple[str, str], float]:
    """Start one process per (name, mode, hold seconds, then): after starting it, wait until it holds the lock
    (then == "in") or for that many seconds (it is expected to be waiting). The times each entered and left."""
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    procs, seen = [], {}
    for name, mode, seconds, then in plan:
        p = ctx.Process(target=_hold, args=(folder, mode, seconds, events, name))
        p.start()
        procs.append(p)
        if then == "in":
            while (name, "in") not in seen:
                got = events.get(timeout=60)
                seen[got[:2]] = got[2]
        else:
            time.sleep(float(then))
    for p in procs:
        p.join(timeout=60)
    while not events.empty():
        name, what, at = events.get()
        seen[(name, what)] = at
    return seen


def test_an_exclusive_holder_keeps_every_other_judge_out(tmp_path):
    t = _run(str(tmp_path), [("timing", EXCLUSIVE, 1.0, "in"), ("check", SHARED, 0.1, 0.0)])
    assert t[("check", "in")] >= t[("timing", "out")]


def test_checks_share_the_device_and_a_waiting_timing_goes_before_later_checks(tmp_path):
    # Two checks overlap; a timing that asks while the first check runs waits for it, and a check that asks after
    # the timing waits for the timing (no stream of checks starves a measurement).
    t = _run(str(tmp_path), [("check1", SHARED, 3.0, "in"), ("check2", SHARED, 0.2, "in"),
                             ("timing", EXCLUSIVE, 0.5, 1.0), ("check3", SHARED, 0.1, 0.0)])
    assert t[("check2", "in")] < t[("check1", "out")]  # shared
    assert t[("timing", "in")] >= t[("check1", "out")]
    assert t[("check3", "in")] >= t[("timing", "out")]


def test_nested_stages_reenter_and_convert_within_one_judge(tmp_path):
    lock = DeviceLock("cpu", str(tmp_path))
    with lock.hold(SHARED) as waited:
        assert waited < 1.0 and lock.mode == SHARED
        with lock.hold(NONE):
            assert lock.mode == SHARED
        with lock.hold(EXCLUSIVE):
            assert lock.mode == EXCLUSIVE
        assert lock.mode == SHARED
    assert lock.mode == NONE
    lock.close()


def test_a_dead_holder_releases_the_device(tmp_path):
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), EXCLUSIVE, 60.0, events, "killed"))
    holder.start()
    assert events.get(timeout=30)[1] == "in"
    holder.kill()
    holder.join()
    lock = DeviceLock("cpu", str(tmp_path))
    started = time.monotonic()
    with lock.hold(EXCLUSIVE):
        assert time.monotonic() - started < 5


def _convert(folder: str, events, name: str) -> None:
    lock = DeviceLock("cpu", folder)
    with lock.hold(SHARED):
        events.put((name, "shared", time.monotonic()))
        time.sleep(0.5)  # both hold it shared before either asks for more
        with lock.hold(EXCLUSIVE):
            events.put((name, "exclusive", time.monotonic()))
            time.sleep(0.2)


def test_two_judges_going_up_from_shared_at_once_do_not_deadlock(tmp_path):
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    procs = [ctx.Process(target=_convert, args=(str(tmp_path), events, n)) for n in ("a", "b")]
    for p in procs:
        p.start()
    got = [events.get(timeout=30) for _ in range(4)]
    assert sorted(what for _, what, _ in got) == ["exclusive", "exclusive", "shared", "shared"]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
