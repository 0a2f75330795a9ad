"""`torch.compile` of the reference in a background thread of the judge (`judge/reference/compiled.py`), with a real
device lock: the compile holds the device shared through its own lock description, so a timing (this judge's or
another's) waits for it while checks go on beside it, and its failures are notes, never errors.

The compile itself is a stand-in here (Inductor on the CPU needs a C++ toolchain and minutes); the GPU test in
`tests/gpu/test_engine_gpu.py` runs the real one inside an evaluation.
"""

from __future__ import annotations

import threading
import time

import torch

from workbench.eval.judge.device_lock import EXCLUSIVE, SHARED, DeviceLock
from workbench.eval.judge.reference import compiled as reference_compile

COMPILE_S = 1.0


def _slow_compile(started: threading.Event, seen: list[int]):
    def compile_fn(model, inputs):
        started.set()
        time.sleep(COMPILE_S)
        seen.append(int(model(*inputs).sum()))
        return (lambda *xs: model(*xs)), ""
    return compile_fn


def test_a_timing_waits_for_the_background_compile_and_a_check_does_not(tmp_path):
    lock = DeviceLock("cpu", str(tmp_path))
    started, seen = threading.Event(), []
    job = reference_compile.start(lambda x: x + 1, [torch.ones(3)], "cpu", lock, _slow_compile(started, seen))
    assert started.wait(5)
    assert job.running

    other = DeviceLock("cpu", str(tmp_path))  # another judge on the same device
    t0 = time.perf_counter()
    with other.hold(SHARED):
        assert time.perf_counter() - t0 < 0.5  # a check shares the device with the compile
    with other.hold(EXCLUSIVE) as waited:
        assert seen == [6]  # a timing got the device only once the compile's work was over
        assert waited > 0.3
    mine_t0 = time.perf_counter()
    with lock.hold(EXCLUSIVE):  # this judge's own timing holds nothing the thread needs: no deadlock
        assert time.perf_counter() - mine_t0 < 0.5
    fn, note, _ = job.take()
    assert note == "" and not job.running
    assert float(fn(torch.zeros(2)).sum()) == 2.0
    assert job.seconds >= COMPILE_S
    lock.close()
    other.close()


def test_a_failing_compile_is_a_note_and_take_waits_for_the_end():
    def broken(model, inputs):
        time.sleep(0.3)
        raise RuntimeError("inductor exploded")

    job = reference_compile.start(lambda x: x, [torch.ones(1)], "cpu", None, broken)
    fn, note, waited = job.take()
    assert fn is None and "RuntimeError" in note and "compiled line omitted" in note
    assert waited > 0.1 and not job.running


def test_the_real_compile_reference_reports_a_failure_as_a_note():
    class Raises(torch.nn.Module):
        def forward(self, x):
            raise ValueError("no forward here")

    fn, note = reference_compile.compile_reference(Raises(), [torch.ones(2)])
    assert fn is None and "torch.compile of the reference failed" in note


def test_a_compile_still_running_at_the_deadline_leaves_the_compiled_line_out():
    release = threading.Event()

    def stuck(model, inputs):
        release.wait(10)
        return model, ""

    job = reference_compile.start(lambda x: x, [torch.ones(1)], "cpu", None, stuck)
    fn, note, waited = job.take(timeout=0.2)
    assert fn is None and "still running after 0.2 s" in note and 0.15 < waited < 2
    release.set()
    assert job.take()[0] is not None


def test_the_compile_goes_beside_the_check_only_where_its_first_call_fits():
    gib = 1 << 30
    assert reference_compile.fits_beside(gib // 16, 80 * gib)
    assert not reference_compile.fits_beside(4 * gib, 80 * gib)  # 8 x 4 GiB > a quarter of 80 GiB
    assert not reference_compile.fits_beside(gib // 16, None)  # unknown free memory
    assert not reference_compile.fits_beside(0, 80 * gib)


def test_a_finished_job_made_in_the_calling_thread_is_taken_at_once():
    job = reference_compile.CompileJob.finished("fn", "", 2.5)
    assert not job.running and job.take()[:2] == ("fn", "") and job.seconds == 2.5


def test_a_judge_waiting_for_its_compile_must_hold_no_lock(tmp_path):
    """The cycle the timing stage's wait avoids: the compile thread queues behind another judge's timing, and that
    timing waits for every shared holder, so a judge waiting for its thread while it holds the device shared would
    wait forever. Holding nothing, it gets the compiled reference once the other judge has timed."""
    from workbench.eval.judge.device_lock import NONE
    from workbench.eval.judge.evaluation import STAGE_LOCKS

    main, other = DeviceLock("cpu", str(tmp_path)), DeviceLock("cpu", str(tmp_path))
    timed = threading.Event()

    def other_judge_times():
        with other.hold(EXCLUSIVE):
            timed.set()

    with main.hold(SHARED):  # this judge's check
        waiter = threading.Thread(target=other_judge_times)
        waiter.start()
        time.sleep(0.3)  # the other judge now waits for a timing, at the gate
        job = reference_compile.start(lambda x: x, [torch.ones(1)], "cpu", main, lambda m, xs: (m, ""))
        fn, note, _ = job.take(timeout=1.0)
        assert fn is None and "still running" in note and not timed.is_set()  # stuck while this hold stays
    fn, note, _ = job.take(timeout=10)  # let go: the other judge times, then the compile runs
    assert fn is not None and note == "" and timed.is_set()
    waiter.join(5)
    assert STAGE_LOCKS.get("compile", NONE) == NONE  # the timing stage's wait (`compiled_reference`) holds nothing
    main.close()
    other.close()


def test_the_main_thread_gets_the_interpreter_quickly_while_a_compile_runs():
    """The compile thread hands the GIL over within COMPILE_SWITCH_S while it runs, and the interval in force before
    comes back when the last of two overlapping compiles ends, and after a failing one."""
    import sys

    before = sys.getswitchinterval()
    assert before > reference_compile.COMPILE_SWITCH_S
    seen: list[float] = []
    release = threading.Event()

    def compile_fn(model, inputs):
        seen.append(sys.getswitchinterval())
        assert release.wait(5)
        return model, ""

    def broken(model, inputs):
        seen.append(sys.getswitchinterval())
        assert release.wait(5)
        raise RuntimeError("inductor exploded")

    first = reference_compile.start(lambda x: x, [torch.ones(1)], "cpu", None, compile_fn)
    second = reference_compile.start(lambda x: x, [torch.ones(1)], "cpu", None, broken)
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [reference_compile.COMPILE_SWITCH_S] * 2
    assert sys.getswitchinterval() == reference_compile.COMPILE_SWITCH_S
    release.set()
    assert first.take(5)[1] == "" and "inductor exploded" in second.take(5)[1]
    assert sys.getswitchinterval() == before
