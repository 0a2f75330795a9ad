"""A judge process killed mid-batch (the machine's OOM killer, an operator): the candidate it held is evaluated
again on a fresh judge, and every candidate of the batch gets exactly one Result, stored once in a real store."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.dispatch import pool as judge_pool

SLOW_TORCH = '''
import time, torch, torch.nn as nn
# variant {i}
class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep({sleep})
        return torch.softmax(x, -1)
'''


@pytest.fixture
def two_cpu_judges(monkeypatch):
    judge_pool.shutdown_judges()
    monkeypatch.setenv("KWB_JUDGES", "2")
    yield
    judge_pool.shutdown_judges()


def test_a_judge_killed_mid_batch_costs_no_result(two_cpu_judges, tmp_path):
    store = wb.Store(tmp_path / "results.db")
    cands = [wb.Candidate(source=SLOW_TORCH.format(i=i, sleep=0.6 if i == 0 else 0.05), language="torch",
                          baseline=True) for i in range(4)]
    killed: list[int] = []

    def kill_the_judge_of_the_slow_one() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for judge in judge_pool.judges("cpu"):
                if judge in judge_pool._BUSY and judge.ready and judge.jobs == 1 and judge.alive():
                    time.sleep(0.3)  # into the evaluation: the candidate's runner is at work
                    os.killpg(judge.pid, signal.SIGKILL)
                    killed.append(judge.pid)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_judge_of_the_slow_one)
    killer.start()
    results = wb.evaluate_many(softmax_task(), cands, device="cpu", store=store, progress=False, time_it=False)
    killer.join()
    assert killed, "no judge was killed: the test did not test anything"
    assert [r.candidate_id for r in results] == [c.id for c in cands]
    assert [r.status for r in results] == ["ok"] * 4, [(r.status, r.message[:200]) for r in results]
    restarted = [r for r in results if r.protocol.get("judge_restarted")]
    assert len(restarted) == 1 and restarted[0].metadata["judge_pid"] != killed[0]
    frame = store.frame()
    assert len(frame) == 4 and frame["candidate_id"].nunique() == 4
