"""Judges over several GPUs and memory admission, on fake GPUs: which GPUs are chosen, where each candidate is
placed, that a judge sees its GPU alone, and that running out of memory beside other judges is evaluated again
with the GPU to itself (never a verdict caused by another evaluation)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.dispatch import gpus
from workbench.dispatch import pool as judge_pool
from workbench.dispatch.judges import Judge
from workbench.errors import WorkbenchError
from workbench.eval import evaluate as evaluate_module
from workbench.eval.wire import judge_messages as wire
from workbench.eval.wire.diagnostics import Diagnostics


class FakeJudge:
    """A judge process stand-in: `script(judge, job)` answers each request (it may sleep to stay busy)."""

    started: list[FakeJudge] = []
    script = staticmethod(lambda judge, job: wire.Reply(status="ok"))

    def __init__(self, device: str, peers: int = 1):
        self.device, self.peers = device, peers
        self.job_device = "cuda" if device.startswith("cuda:") else device
        self.ready, self.jobs, self.killed, self.pid = True, 0, False, 1000 + len(FakeJudge.started)
        self.requests: list[tuple[str, float]] = []
        FakeJudge.started.append(self)

    def alive(self) -> bool:
        return not self.killed

    def request(self, job, timeout, relay=None):
        self.jobs += 1
        self.requests.append((job.device, time.monotonic()))
        return type(self).script(self, job)

    def kill(self) -> None:
        self.killed = True

    close = kill


@pytest.fixture
def two_gpus(monkeypatch):
    """Two fake GPUs, two judges each, fake judge processes; the pool empty before and after."""
    judge_pool.shutdown_judges()
    FakeJudge.started = []
    FakeJudge.script = staticmethod(lambda judge, job: wire.Reply(status="ok"))
    monkeypatch.setattr(gpus, "visible_count", lambda: 2)
    monkeypatch.setattr(judge_pool, "Judge", FakeJudge)
    monkeypatch.setenv("KWB_JUDGES", "2")
    monkeypatch.delenv("KWB_GPUS", raising=False)
    yield
    judge_pool.shutdown_judges()


def _job(device: str = "cuda") -> wire.Job:
    return evaluate_module.make_job(softmax_task(), wb.Candidate(source="x = 1", language="triton"),
                                    wb.EvalOptions(device=device))


def test_the_gpus_chosen_come_from_devices_then_kwb_gpus_then_every_visible_one(monkeypatch):
    monkeypatch.delenv("KWB_GPUS", raising=False)
    assert gpus.chosen(count=4) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    monkeypatch.setenv("KWB_GPUS", "2, 0")
    assert gpus.chosen(count=4) == ["cuda:2", "cuda:0"]
    assert gpus.chosen(["cuda:1", 3, "1"], count=4) == ["cuda:1", "cuda:3"]
    monkeypatch.setenv("KWB_GPUS", "all")
    assert gpus.chosen(count=2) == ["cuda:0", "cuda:1"]
    for bad, says in ((["cuda:4"], "not visible here"), (["gpu0"], "name GPUs by index"), ([-1], "not visible")):
        with pytest.raises(WorkbenchError, match=says):
            gpus.chosen(bad, count=4)
    monkeypatch.setenv("KWB_GPUS", ",")
    with pytest.raises(WorkbenchError, match="names no GPU"):
        gpus.chosen(count=4)


def test_a_judge_sees_its_gpu_alone_by_the_callers_own_numbering(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,GPU-abc")
    assert gpus.physical_id("cuda:0") == "5" and gpus.physical_id("cuda:1") == "GPU-abc"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpus.physical_id("cuda:3") == "3"
    # A real judge process started for the caller's second GPU gets that GPU alone, and its jobs say "cuda"; with
    # two GPUs it keeps to the second half of the caller's cores, so two GPUs' timings never share a core.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    monkeypatch.setattr(gpus, "visible_count", lambda: 2)
    cores = sorted(os.sched_getaffinity(0))
    judge = Judge("cuda:1")
    try:
        deadline = time.monotonic() + 30
        env: dict[bytes, bytes] = {}
        while b"KWB_WORKDIR" not in env and time.monotonic() < deadline:  # until the child has exec'd the judge
            with open(f"/proc/{judge.pid}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            time.sleep(0.02)
        assert env[b"CUDA_VISIBLE_DEVICES"] == b"7"
        assert judge.job_device == "cuda" and judge.device == "cuda:1"
        if len(cores) >= 2:
            second_half = set(cores[len(cores) // 2:])
            assert {int(c) for c in env[b"KWB_JUDGE_CORES"].split(b",")} == second_half
            deadline = time.monotonic() + 30
            while os.sched_getaffinity(judge.pid) != second_half and time.monotonic() < deadline:
                time.sleep(0.05)
            assert os.sched_getaffinity(judge.pid) == second_half
    finally:
        judge.kill()


def test_each_gpu_gets_its_own_share_of_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    shares = [gpus.cores_for(f"cuda:{k}", count=4) for k in range(4)]
    assert shares[0] == "0,1,2,3,4,5,6,7" and shares[3] == "24,25,26,27,28,29,30,31"
    assert gpus.cores_for("cuda:0", count=1) == ""  # one GPU: its judges keep every core


def test_candidates_go_to_the_least_busy_gpu_and_a_pinned_one_stays_put(two_gpus):
    relay = judge_pool.ProgressRelay(None)
    first = judge_pool._acquire("cuda", relay)
    second = judge_pool._acquire("cuda", relay)
    assert {first.device, second.device} == {"cuda:0", "cuda:1"}  # spread before doubling up
    third = judge_pool._acquire("cuda", relay)
    fourth = judge_pool._acquire("cuda", relay)
    assert sorted(j.device for j in (first, second, third, fourth)) == ["cuda:0", "cuda:0", "cuda:1", "cuda:1"]
    assert judge_pool.occupancy("cuda") == {"cuda:0": (2, 2), "cuda:1": (2, 2)}
    judge_pool._release(second)
    assert judge_pool._acquire("cuda", relay) is second  # the GPU with room, its idle judge reused
    judge_pool._release(first)
    judge_pool._release(second)
    pinned = judge_pool._acquire("cuda:1", relay)
    assert pinned.device == "cuda:1"
    assert len(FakeJudge.started) == 4


def test_kwb_gpus_and_devices_limit_the_gpus_used(two_gpus, monkeypatch):
    relay = judge_pool.ProgressRelay(None)
    monkeypatch.setenv("KWB_GPUS", "1")
    assert {judge_pool._acquire("cuda", relay).device for _ in range(2)} == {"cuda:1"}
    assert judge_pool.total_slots("cuda") == 2
    monkeypatch.delenv("KWB_GPUS")
    assert judge_pool.total_slots("cuda") == 4
    assert judge_pool._acquire("cuda", relay, devices=["cuda:0"]).device == "cuda:0"


def test_a_job_reaches_its_judge_as_plain_cuda_and_reports_where_it_ran(two_gpus):
    reply, place = judge_pool.run_placed(_job("cuda:1"), 30)
    assert place == "cuda:1" and reply.status == "ok"
    judge = next(j for j in FakeJudge.started if j.device == "cuda:1")
    assert judge.requests[0][0] == "cuda"


def test_evaluate_many_spreads_a_batch_over_every_gpu(two_gpus, monkeypatch):
    monkeypatch.setattr(evaluate_module, "_require_device", lambda device: None)

    def busy(judge, job):
        time.sleep(0.05)
        return wire.Reply(status="ok")

    FakeJudge.script = staticmethod(busy)
    cands = [wb.Candidate(source=f"x = {i}", language="triton") for i in range(12)]
    results = wb.evaluate_many(softmax_task(), cands, device="cuda", progress=False, time_it=False)
    assert [r.candidate_id for r in results] == [c.id for c in cands]
    per_gpu = {g: sum(r.metadata["gpu"] == g for r in results) for g in ("cuda:0", "cuda:1")}
    assert per_gpu["cuda:0"] >= 3 and per_gpu["cuda:1"] >= 3, per_gpu
    assert len(FakeJudge.started) == 4 and all(j.jobs >= 1 for j in FakeJudge.started)


def _out_of_memory() -> wire.Reply:
    return wire.Reply(status="runtime_error", message="the task does not fit in GPU memory at this size",
                      diagnostics=Diagnostics(out_of_memory=True))


def test_out_of_memory_beside_other_judges_waits_for_the_gpu_alone(two_gpus, monkeypatch):
    """A judge that ran out of memory while another judge of its GPU was busy waits until that one finished, ends
    the GPU's idle judges, and evaluates again with the GPU to itself; meanwhile nothing new starts on that GPU."""
    monkeypatch.setenv("KWB_GPUS", "0")
    relay = judge_pool.ProgressRelay(None)
    other_busy = judge_pool._acquire("cuda", relay)
    state = {"tries": 0, "other_done": None}

    def script(judge, job):
        state["tries"] += 1
        return _out_of_memory() if state["tries"] == 1 else wire.Reply(status="ok")

    FakeJudge.script = staticmethod(script)
    answer: dict = {}
    worker = threading.Thread(target=lambda: answer.update(reply=judge_pool.run_placed(_job(), 30)[0]))
    worker.start()
    time.sleep(0.4)
    assert worker.is_alive() and state["tries"] == 1  # waiting for the busy judge, not retried beside it
    assert "cuda:0" in judge_pool._ALONE or judge_pool._WAITING_ALONE  # the GPU is being handed to it
    state["other_done"] = time.monotonic()
    judge_pool._release(other_busy)
    worker.join(10)
    reply = answer["reply"]
    assert reply.status == "ok" and state["tries"] == 2
    assert "evaluated again with the GPU to itself" in reply.diagnostics.gpu_alone
    retried = next(j for j in FakeJudge.started if j is not other_busy)
    assert retried.requests[1][1] > state["other_done"]
    assert other_busy.killed  # idle by then: ended so its memory is free
    assert not judge_pool._ALONE and not judge_pool._WAITING_ALONE


def test_no_new_evaluation_starts_on_a_gpu_a_judge_waits_to_have_alone(two_gpus, monkeypatch):
    """Otherwise a steady stream of new candidates keeps the GPU busy and the waiting judge never gets it."""
    monkeypatch.setenv("KWB_GPUS", "0")
    monkeypatch.setenv("KWB_JUDGES", "3")  # room for a third judge: only the wait keeps the newcomer off
    relay = judge_pool.ProgressRelay(None)
    other_busy = judge_pool._acquire("cuda", relay)
    FakeJudge.script = staticmethod(lambda judge, job: _out_of_memory() if judge.jobs == 1 else wire.Reply(status="ok"))
    waiting = threading.Thread(target=lambda: judge_pool.run_placed(_job(), 30))
    waiting.start()
    time.sleep(0.4)
    assert judge_pool._WAITING_ALONE
    newcomer: dict = {}
    late = threading.Thread(target=lambda: newcomer.update(judge=judge_pool._acquire("cuda", relay)))
    late.start()
    time.sleep(0.4)
    assert late.is_alive() and not newcomer  # kept off the GPU while a judge waits for it alone
    judge_pool._release(other_busy)
    waiting.join(10)
    late.join(10)
    assert not waiting.is_alive() and newcomer["judge"] is not None
    judge_pool._release(newcomer["judge"])


def test_a_task_that_does_not_fit_an_empty_gpu_still_does_not_fit(two_gpus, monkeypatch):
    monkeypatch.setenv("KWB_GPUS", "0")
    FakeJudge.script = staticmethod(lambda judge, job: _out_of_memory())
    reply, _ = judge_pool.run_placed(_job(), 30)  # the only judge of its GPU: no one else to blame
    assert reply.diagnostics.out_of_memory and reply.diagnostics.gpu_alone is None
    assert FakeJudge.started[0].jobs == 1
    judge_pool.get_judge("cuda:0")  # another judge now shares the GPU: one retry alone, then the verdict stands
    judge_pool._POOL["cuda:0"].append(FakeJudge("cuda:0"))
    reply, _ = judge_pool.run_placed(_job(), 30)
    assert reply.status == "runtime_error" and reply.diagnostics.out_of_memory and reply.diagnostics.gpu_alone


def test_two_judges_out_of_memory_at_once_take_the_gpu_in_turn(two_gpus, monkeypatch):
    monkeypatch.setenv("KWB_GPUS", "0")
    alone_now: list[int] = []
    lock = threading.Lock()

    def script(judge, job):
        if judge.jobs == 1:
            time.sleep(0.1)
            return _out_of_memory()
        with lock:
            alone_now.append(sum(j in judge_pool._BUSY and j not in judge_pool._WAITING_ALONE
                                 for j in judge_pool._POOL["cuda:0"]))
        time.sleep(0.1)
        return wire.Reply(status="ok")

    FakeJudge.script = staticmethod(script)
    replies: list = []
    threads = [threading.Thread(target=lambda: replies.append(judge_pool.run_placed(_job(), 30)[0]))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [r.status for r in replies] == ["ok", "ok"]
    assert alone_now == [1, 1]  # each retry ran with no other judge at work on the GPU


def test_a_batch_names_a_gpu_that_is_not_there_before_any_work(two_gpus, monkeypatch):
    monkeypatch.setattr(evaluate_module, "_require_device", lambda device: None)
    with pytest.raises(WorkbenchError, match="not visible here"):
        wb.evaluate_many(softmax_task(), [wb.Candidate(source="x = 1")], device="cuda", devices=["cuda:5"],
                         progress=False)
    assert FakeJudge.started == []
