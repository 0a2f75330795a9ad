"""The judge keeps the timing pool of its last task for the next candidate (`judge/timing/inputs.py`,
`Context.keep_pool`), and gives its memory back when no job comes for `KWB_POOL_IDLE_S` seconds: an idle judge must
not hold memory the user's own work needs. On the CPU the pool is memfds the judge process holds open. The reuse and
the release are the judge's logic, shown in this process on a scripted runner (`tests/fake_runner.py`); the idle
timer is the judge process's main loop, shown on a real judge."""

from __future__ import annotations

import os
import time

import pytest
from fake_runner import Script, fake_context, judge_fake
from redteam.attacks import kernel, softmax_task

import workbench as wb


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


def test_the_next_candidate_of_a_task_is_timed_on_the_kept_pool_until_the_judge_lets_it_go():
    """Two candidates of a task in one judge: the second is timed on the pool the first was, which the judge holds
    open between them; an idle judge's release (`Context.release_idle`) closes it, and the next candidate gets a new
    one."""
    task, ctx, me = softmax_task(), fake_context(), os.getpid()
    before = _shared_fds(me)
    first = judge_fake(task, Script(), context=ctx)  # the honest softmax kernel
    second = judge_fake(task, Script(), context=ctx)
    assert first.status == second.status == "ok", (first.message, second.message)
    assert first.protocol["timing_pool"] == "new" and second.protocol["timing_pool"] == "kept"
    assert second.timing is not None and second.timing.n > 0
    assert _shared_fds(me) - before >= 2  # the kept pool's sets and slots
    ctx.release_idle()
    assert _shared_fds(me) == before
    third = judge_fake(task, Script(), context=ctx)
    assert third.status == "ok" and third.protocol["timing_pool"] == "new"


def test_an_idle_judge_gives_its_kept_pool_back_and_lives_on(one_judge, monkeypatch):
    """The judge process's main loop: with no job for `KWB_POOL_IDLE_S` it closes the pool it kept after a timed
    candidate, and serves the next job with a new one."""
    monkeypatch.setenv("KWB_POOL_IDLE_S", "2")  # before the judge starts (the first evaluation starts it)
    task = softmax_task()
    cand = kernel()  # the honest softmax kernel
    first = wb.evaluate(task, cand, device="cpu")
    assert first.status == "ok", first.message
    assert first.protocol["timing_pool"] == "new"
    pid = first.metadata["judge_pid"]
    assert _shared_fds(pid) >= 2  # the kept pool's sets and slots
    deadline = time.monotonic() + 20
    while _shared_fds(pid) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert _shared_fds(pid) == 0, "the idle judge still holds its timing pool"
    later = wb.evaluate(task, cand, device="cpu")  # the judge lives on and draws a new pool
    assert later.status == "ok" and later.protocol["timing_pool"] == "new"
    assert later.metadata["judge_pid"] == pid


def test_judges_sharing_a_device_split_the_memory_their_pools_may_take(monkeypatch):
    """Each judge makes its pool from what is free when it is made and keeps it for the next candidate: a quarter
    each for four judges filled an 80 GB GPU. One or two judges take a quarter of free memory each; more split half
    of it. The caller tells each judge how many there are (`judge_slots`, through KWB_JUDGE_PEERS)."""
    from workbench.dispatch.judges import Judge
    from workbench.eval.judge.timing import inputs as input_pool

    assert [input_pool.memory_share(p) for p in (1, 2, 3, 4, 8)] == [0.25, 0.25, pytest.approx(1 / 6), 0.125,
                                                                      0.0625]
    monkeypatch.setenv("KWB_JUDGE_PEERS", "4")
    gib = 1 << 30
    assert input_pool.sets_that_fit(gib // 2, 64 * gib, 256) == 16  # 8 GiB of 64: 16 sets of half a GiB
    monkeypatch.setenv("KWB_JUDGE_PEERS", "1")
    assert input_pool.sets_that_fit(gib // 2, 64 * gib, 256) == 32
    from workbench.dispatch import pool

    monkeypatch.setenv("KWB_JUDGES", "3")
    for judge in (Judge("cpu", peers=3), pool._start("cpu")):  # as the caller's pool starts them
        try:
            with open(f"/proc/{judge.proc.pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        finally:
            judge.close()
        assert b"KWB_JUDGE_PEERS=3" in environ
