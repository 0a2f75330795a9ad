"""Memory admission on a GPU (`judge/memory_admission.py`): large evaluations book their memory in a ledger every judge
of the device shares and wait for room; small ones pass; the first in line goes first; a dead judge's booking is gone;
a candidate's own out-of-memory beside other judges is marked so the caller evaluates it again with the GPU alone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from workbench.eval.judge import memory_admission, verdict
from workbench.eval.judge.memory_admission import Ledger, need_bytes

GIB = 2**30


def test_a_softmax_of_6_gib_books_ten_copies_of_its_inputs_and_outputs():
    assert need_bytes(6 * GIB, 6 * GIB, 0) == 60 * GIB
    assert need_bytes(4 * GIB, None, 1 * GIB) == 43 * GIB  # an untraced output counted as large as the inputs


def test_a_small_evaluation_is_not_booked(tmp_path):
    ledger = Ledger(str(tmp_path), "gpu-x", 100 * GIB)
    with ledger.booked(4 * GIB) as waited:
        assert waited == 0.0
        assert not (tmp_path / "gpu-x.memory").exists()


def _book(ledger: Ledger, need: int, hold: threading.Event, log: list[str], name: str) -> threading.Thread:
    def run() -> None:
        with ledger.booked(need):
            log.append(f"{name} in")
            hold.wait(10)
        log.append(f"{name} out")

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _until(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_large_evaluations_wait_for_room_and_go_in_order_of_arrival(tmp_path):
    """Budget 90 of 100: A (50) runs; B (60) waits; C (30) would fit beside A but not beside A and B, who came first,
    so it waits too; when A leaves, B and C both fit (60 + 30 = 90) and go."""
    ledger = Ledger(str(tmp_path), "gpu-x", 100 * GIB)
    log: list[str] = []
    release_a, release_bc = threading.Event(), threading.Event()
    a = _book(ledger, 50 * GIB, release_a, log, "A")
    _until(lambda: log == ["A in"])
    b = _book(ledger, 60 * GIB, release_bc, log, "B")
    time.sleep(0.3)
    c = _book(ledger, 30 * GIB, release_bc, log, "C")
    time.sleep(3 * memory_admission.POLL_S)
    assert log == ["A in"]
    release_a.set()
    _until(lambda: {"B in", "C in"} <= set(log))
    assert log.index("A out") < log.index("B in")
    release_bc.set()
    for t in (a, b, c):
        t.join(5)
    assert not any(t.is_alive() for t in (a, b, c))


def test_an_evaluation_larger_than_the_budget_still_runs_alone(tmp_path):
    ledger = Ledger(str(tmp_path), "gpu-x", 100 * GIB)
    with ledger.booked(200 * GIB) as waited:
        assert waited < 1.0


def test_a_dead_judges_booking_is_dropped(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    booking = {f"{dead.pid}-0": {"bytes": 80 * GIB, "since": 0, "running": True}}
    (tmp_path / "gpu-x.memory").write_text(json.dumps(booking))
    ledger = Ledger(str(tmp_path), "gpu-x", 100 * GIB)
    started = time.monotonic()
    with ledger.booked(50 * GIB):
        assert time.monotonic() - started < 1.0


def test_a_candidates_own_out_of_memory_is_marked_for_the_callers_retry_alone():
    """The candidate's runner ran out of GPU memory: with other judges on the GPU, their memory may be why, so the
    reply says so (`dispatch/pool.py` then evaluates it again with the GPU to itself); other failures are not marked."""
    oom = verdict.candidate_failed("OutOfMemoryError", "CUDA out of memory. Tried to allocate 4.00 GiB", "forward",
                                   "", "")
    assert oom["status"] == "runtime_error" and oom["out_of_memory"] is True
    assert "out of memory during forward" in oom["message"]
    other = verdict.candidate_failed("IndexError", "index 5 is out of bounds", "forward", "", "")
    assert other["out_of_memory"] is False
