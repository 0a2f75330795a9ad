"""The timing stage around the timed rounds (`judge/timing/stage.py`), on a scripted runner (`tests/fake_runner.py`)
on the CPU: what holds the device exclusively while the pool is made, and what a later candidate of the same task
reuses."""

from __future__ import annotations

import contextlib
import time

import pytest
import torch
from fake_runner import FakeForkServer, FakeRunner, Script, one_thread

import workbench as wb
from workbench.eval.judge.reference.rounds import build_reference
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing import stage as timing_stage
from workbench.eval.judge.timing.inputs import InputPool
from workbench.eval.judge.timing.pair import ReferenceSide
from workbench.eval.wire.diagnostics import Diagnostics
from workbench.tasks.kernelbench import reference_as_candidate
from workbench.tasks.task import LoadedReference


@pytest.fixture
def softmax(tmp_path):
    task = wb.get_task("softmax")
    size = task.sizes["cpu"]
    ref = LoadedReference(task, str(tmp_path))
    return task, size, ref, build_reference(ref, size, "cpu", 0)


#: The candidate's runner: the reference's math, 2 ms a call by its runner's clock and the judge's alike.
CandidateRunner = FakeRunner.scripted(Script(forward=lambda x: torch.softmax(x, dim=-1), ms=2.0))


@pytest.fixture
def server():
    server = FakeForkServer("cpu")
    with one_thread():
        yield server
    server.close()


class _Exclusive:
    """Stands for the judge's exclusive hold of the device: counts its holds and whether one is held now."""

    def __init__(self) -> None:
        self.holds = 0
        self.held = False

    @contextlib.contextmanager
    def __call__(self):
        self.holds += 1
        self.held = True
        try:
            yield
        finally:
            self.held = False


def test_only_the_measurements_hold_the_device_exclusively(softmax, server, monkeypatch):
    """The reference's estimate and the null calibration are measurements and run inside the exclusive hold; drawing
    the pool's sets is not, and runs outside it (another judge's checks go on meanwhile). A later candidate of the
    task, with a recent calibration for the same pool, needs no exclusive hold at all."""
    _, size, ref, model = softmax
    exclusive = _Exclusive()
    pools_made_inside: list[bool] = []
    create = InputPool.create.__func__

    def spying_create(cls, *args, **kwargs):
        pools_made_inside.append(exclusive.held)
        return create(cls, *args, **kwargs)

    monkeypatch.setattr(InputPool, "create", classmethod(spying_create))
    profiles = []
    for _ in range(2):
        with CandidateRunner.start(server, "cpu") as runner:
            session = CandidateSession(runner, "cpu", 60.0)
            plan, known = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False,
                                               known=profiles[-1] if profiles else None, measuring=exclusive)
            profiles.append(known)
            session.close()
        if len(profiles) == 1:
            assert exclusive.holds == 2 and not plan.calibration_reused  # the estimate, then the calibration
    assert plan.calibration_reused and exclusive.holds == 2  # the second candidate measured nothing
    assert pools_made_inside == [False, False]


def _time(session, ref, model, size, task, known, compiled):
    cand = reference_as_candidate(task)
    session.load(cand.source, "torch", "ModelNew", task.precision.to_spec(), 60.0)
    remote = session.model(model, ref.init_inputs(size, 0), 0, {**ref.defaults, **size})
    result: dict = {}
    diagnostics = Diagnostics()
    timing_stage.run(session, remote.model_id, known[0], ReferenceSide(model, compiled, task.tolerance), "cpu",
                     "torch", None, result, diagnostics, known[1])
    result["diagnostics"] = diagnostics
    return result


def test_a_recent_compiled_reference_timing_is_reused_not_timed_again(softmax, server):
    """torch.compile of the reference is an aside the same for every candidate of a task: the first candidate times
    it, a later one within the reuse window gets that timing (said in the protocol) and spends no call on it, and
    once the window has passed it is timed again."""
    task, size, ref, model = softmax
    calls = []

    def compiled(*xs):  # stands for torch.compile of the reference (the judge compiles only on a GPU)
        calls.append(1)
        return model(*xs)

    results, known = [], None
    for age in (None, 0.0, timing_stage.CALIBRATION_REUSE_S + 1):
        if known is not None:
            known.compiled_at = time.monotonic() - age
        before = len(calls)
        with CandidateRunner.start(server, "cpu") as runner:
            session = CandidateSession(runner, "cpu", 60.0)
            plan, known = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False,
                                               known=known)
            results.append((_time(session, ref, model, size, task, (plan, known), compiled), len(calls) - before))
            session.close()
    (first, first_calls), (second, second_calls), (third, third_calls) = results
    assert first_calls > 0 and first["diagnostics"].compiled_reference == "timed"
    assert second_calls == 0
    assert second["compiled_reference_timing"] == first["compiled_reference_timing"]
    assert second["diagnostics"].compiled_reference.startswith("reused")
    assert third_calls > 0 and third["diagnostics"].compiled_reference == "timed"
    assert third["compiled_reference_timing"] == known.compiled
    for result in (first, second, third):  # the pair itself is timed for every candidate
        assert result["timing"]["n"] > 0 and result["reference_timing"]["n"] > 0


def _raw_bytes(pool: InputPool) -> list:
    return [b.raw for b in pool.arena.owned()]


def test_a_kept_pool_is_lent_to_the_next_runner_zeroed_and_refreshed_before_timing(softmax, server):
    """The judge keeps the last timing pool for the next candidate of the task: the next runner gets the same
    buffers (no new draw, no new share), zeroed first, so nothing the earlier runner wrote into them reaches it, and
    marked lent, so the timing writes new contents into every set before its first batch. The pair is then timed on
    it as on a new pool."""
    task, size, ref, model = softmax
    with CandidateRunner.start(server, "cpu") as runner:
        session = CandidateSession(runner, "cpu", 60.0)
        plan, known = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False)
        first_pool = plan.pool
        session.close()
    assert first_pool.keepable and first_pool.n > 1
    for raw in _raw_bytes(first_pool):  # what the first runner could have left in the pool
        raw.fill_(0xAB)
    assert all(int(raw.max()) == 0xAB for raw in _raw_bytes(first_pool))
    with CandidateRunner.start(server, "cpu") as runner:
        session = CandidateSession(runner, "cpu", 60.0)
        plan, known = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False,
                                           known=known, kept=first_pool)
        assert plan.pool is first_pool and plan.calibration_reused
        assert all(int(raw.abs().max()) == 0 for raw in _raw_bytes(first_pool))
        assert first_pool.lent
        result = _time(session, ref, model, size, task, (plan, known), None)
        session.close()
    assert result["timing"]["n"] > 0 and result["reference_timing"]["n"] > 0
    assert not result.get("flags"), result.get("flags")
    # the first set, timed in every batch, holds drawn contents again (the refresh before the first batch), not
    # zeros; a set beyond the batch's calls is not refreshed, and need not be: nothing reads it
    assert all(float(t.abs().sum()) > 0 for t in first_pool.sets[0] if hasattr(t, "abs"))
    first_pool.free()
    assert first_pool.arena is None and first_pool.sets == []


def test_the_judge_keeps_one_pool_and_frees_a_pool_of_another_task(softmax, server):
    """`Context.take_pool`: the kept pool of the same key is handed out once; asking for another key frees it (it
    would hold memory through an evaluation that cannot use it); dropping the device caches frees it too."""
    from workbench.eval.judge.context import Context

    _, size, ref, model = softmax
    pools = []
    for _ in range(2):
        with CandidateRunner.start(server, "cpu") as runner:
            session = CandidateSession(runner, "cpu", 60.0)
            plan, _ = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False)
            pools.append(plan.pool)
            session.close()
    ctx = Context(fork_server=None, workdir="/tmp")
    key, other = ("task-a", "size", 0, "cpu"), ("task-b", "size", 0, "cpu")
    ctx.keep_pool(key, pools[0])
    assert ctx.take_pool(key) is pools[0] and ctx.take_pool(key) is None
    ctx.keep_pool(key, pools[0])
    ctx.keep_pool(key, pools[1])  # a newer pool of the key replaces the kept one, which is freed
    assert pools[0].arena is None and pools[1].arena is not None
    assert ctx.take_pool(other) is None and pools[1].arena is None
