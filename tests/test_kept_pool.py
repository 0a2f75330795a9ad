"""The judge keeps the timing pool of its last task for the next candidate (`judge/input_pool.py`,
`Context.keep_pool`), and gives its memory back when no job comes for `KWB_POOL_IDLE_S` seconds: an idle judge must
not hold memory the user's own work needs. Real judges and runners on the CPU, where the pool is memfds the judge
process holds open."""

from __future__ import annotations

import os
import time

import pytest
from redteam.attacks import kernel, softmax_task

import workbench as wb
from workbench.eval.caller.pool import shutdown_workers


def _shared_fds(pid: int) -> int:
    """Shared-memory descriptors the process holds open (the pool's buffers among them)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("/memfd:kwb-shared"):
                count += 1
        except OSError:
            pass
    return count


@pytest.fixture
def one_judge(monkeypatch):
    monkeypatch.setenv("KWB_JUDGES", "1")
    monkeypatch.setenv("KWB_POOL_IDLE_S", "2")
    shutdown_workers()
    yield
    shutdown_workers()


def test_the_next_candidate_of_a_task_is_timed_on_the_kept_pool_until_the_judge_idles(one_judge):
    task = softmax_task()
    cand = kernel()  # the honest softmax kernel
    first = wb.evaluate(task, cand, device="cpu")
    second = wb.evaluate(task, cand, device="cpu")
    assert first.status == second.status == "ok", (first.message, second.message)
    assert first.protocol["timing_pool"] == "new" and second.protocol["timing_pool"] == "kept"
    assert second.timing is not None and second.timing.n > 0 and second.reference_timing is not None
    pid = second.metadata["judge_pid"]
    assert pid == first.metadata["judge_pid"]
    assert _shared_fds(pid) >= 2  # the kept pool's sets and slots
    deadline = time.monotonic() + 20
    while _shared_fds(pid) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert _shared_fds(pid) == 0, "the idle judge still holds its timing pool"
    third = wb.evaluate(task, cand, device="cpu")  # the judge lives on and draws a new pool
    assert third.status == "ok" and third.protocol["timing_pool"] == "new"
    assert third.metadata["judge_pid"] == pid
