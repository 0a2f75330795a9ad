"""The reference timed in a runner of its own (`judge/reference/runner.py`): the default wherever its time decides a
verdict (a GPU, the CPU's wall clock), not beside Triton's interpreter. The runner is launched before the candidate's
import, kept with the timing pool for the next candidate of the task, and goes with the pool when the judge idles;
where it cannot serve (nested inputs), the judge times the reference itself and says why."""

from __future__ import annotations

import os
import time

import pytest
from engine_tasks import evaluate_after_an_import_failure

import workbench as wb
from workbench.tasks.kernelbench import reference_as_candidate

SOFTMAX = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 32
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

NESTED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, xs):
        return torch.stack(list(xs)).sum(0)


def get_inputs():
    return [[torch.randn(16, 32) for _ in range(3)]]


def get_init_inputs():
    return []
'''


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (the judge's fork server and the runners it forked)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[int(name)] = int(fields[1])
            except (OSError, IndexError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _settled_descendants(pid: int) -> set[int]:
    """`_descendants` once the last evaluation's runner has gone: the judge reaps it after the reply
    (`runner_start.close_runner`), so a count taken at once may still hold it."""
    seen = _descendants(pid)
    for _ in range(20):
        time.sleep(0.2)
        now = _descendants(pid)
        if now == seen:
            return now
        seen = now
    return seen


def test_the_reference_is_timed_in_its_own_runner_kept_with_the_pool_until_the_judge_idles(one_judge, monkeypatch):
    monkeypatch.setenv("KWB_POOL_IDLE_S", "3")
    task = wb.Task.from_source(SOFTMAX, name="aa-softmax")
    first = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    second = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    for res in (first, second):
        assert res.status == "ok", res.message
        assert res.reference_timing is not None and res.reference_timing.n > 0
        assert res.timing is not None and len(res.timing.samples_ms) == len(res.reference_timing.samples_ms)
        assert "paired" in res.protocol["speedup_ci_method"]
        # The sides take turns going first: rounds 2, 4, ... the reference, 3, 5, ... the candidate.
        assert res.protocol["candidate_first_batches"] == res.protocol["timed_batches"] // 2
    assert first.protocol["reference_timed_in"] == "runner"
    assert second.protocol["reference_timed_in"] == "runner (kept)"
    assert second.protocol["timing_pool"] == "kept"
    pid = second.metadata["judge_pid"]
    kept = _settled_descendants(pid)
    deadline = time.monotonic() + 30
    while len(_descendants(pid)) >= len(kept) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert len(_descendants(pid)) < len(kept), "the idle judge still runs the reference's runner"
    third = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert third.status == "ok" and third.protocol["reference_timed_in"] == "runner"


def test_the_judge_times_the_reference_itself_where_a_runner_cannot_map_the_inputs():
    task = wb.Task.from_source(NESTED, name="aa-nested")
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert res.status == "ok", res.message
    assert res.reference_timing is not None and res.reference_timing.n > 0
    assert res.protocol["reference_timed_in"].startswith("judge: the timing inputs are nested")


def test_on_the_cpu_a_wall_clock_timing_has_the_reference_runner_and_an_interpreted_one_does_not():
    """Identical code timed in a runner and in the judge's own process read a decided "slower" (0.90-0.95); in two
    runners it reads no difference. An interpreted kernel's time decides nothing: no runner is started for it."""
    # The pooled judge sees the environment the suite started with.
    if os.environ.get("KWB_REFERENCE_RUNNER"):
        pytest.skip("KWB_REFERENCE_RUNNER is set in this environment: the CPU default cannot be seen")
    task = wb.Task.from_source(SOFTMAX, name="aa-softmax-default")
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert res.status == "ok", res.message
    assert res.protocol["reference_timed_in"] == "runner"
    assert res.protocol["candidate_first_batches"] == res.protocol["timed_batches"] // 2
    assert res.speedup_verdict in ("same", "inconclusive"), res
    builtin = wb.get_task("softmax")
    interpreted = wb.evaluate(builtin, builtin.solution_candidate(), device="cpu")
    assert interpreted.status == "ok", interpreted.message
    assert interpreted.timing is not None and interpreted.timing.clock == "interpreter"
    assert "reference_timed_in" not in interpreted.protocol and interpreted.speedup is None


def test_a_runner_kept_from_a_candidate_that_never_reached_timing_serves_the_next_one():
    """The reference's runner is launched before the candidate's import: a candidate that fails there leaves it kept
    with the pool, its queued replies unread; the next candidate of the task reads them and times on it (the CPU pool
    has one judge, so both evaluations meet it)."""
    res = evaluate_after_an_import_failure(wb.Task.from_source(SOFTMAX, name="aa-softmax-after-failure"))
    assert res.protocol["reference_timed_in"] == "runner (kept)"
