"""The reference's runner's untimed first call (`reference_runner.warm_first_call`): queued after the pool, read with
the other replies, and only where it fits beside the check. Real fork server and runners on the CPU (the judge asks
for the call only on a GPU; the request and its reply are the same)."""

from __future__ import annotations

import types

import workbench as wb
from workbench.eval.judge.reference import runner as reference_runner
from workbench.eval.judge.reference.rounds import build_reference
from workbench.eval.judge.reference.runner import ReferenceRunner
from workbench.eval.judge.runners.process import ForkServer, Limits, RunnerProcess
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing import stage as timing_stage
from workbench.tasks.kernelbench import reference_as_candidate
from workbench.tasks.task import LoadedReference


def test_a_warmed_reference_runner_answers_its_first_call_then_times(tmp_path):
    task = wb.get_task("softmax")
    size = task.sizes["cpu"]
    ref = LoadedReference(task, str(tmp_path))
    model = build_reference(ref, size, "cpu", 0)
    server = ForkServer("cpu")
    try:
        with RunnerProcess.start(server, "cpu") as runner:
            session = CandidateSession(runner, "cpu", 60.0)
            plan, _ = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False)
            ctx = types.SimpleNamespace(fork_server=server, share_ipc=False, transport="auto", runner_class=RunnerProcess)
            launched = []
            for warm in (True, False):
                launched.append(ReferenceRunner.launch(
                    ctx, "cpu", Limits(), 60.0, plan.pool, model, reference_as_candidate(task).source,
                    task.precision.to_spec(), ref.init_inputs(size, 0), 0, {**ref.defaults, **size}, warm=warm))
            for reference, warm in zip(launched, (True, False), strict=True):
                assert reference.warmed is warm
                reference.ready()  # reads loaded, built, pong and, when warmed, the call's output
                samples, bracket = reference.time([0, 1], (), 60.0)
                assert len(samples.stream_ms) == 2 and bracket > 0
                reference.close()
            session.close()
    finally:
        server.close()


def test_the_first_call_is_made_only_on_a_gpu_and_where_it_fits_beside_the_check(monkeypatch):
    pool = types.SimpleNamespace(set_bytes=1 << 30)
    monkeypatch.setattr("workbench.eval.judge.timing.inputs.free_bytes", lambda device: 64 << 30)
    assert reference_runner.warm_first_call(pool, "cuda:0")  # 8 x 1 GiB within a quarter of 64 GiB
    assert not reference_runner.warm_first_call(pool, "cpu")
    monkeypatch.setattr("workbench.eval.judge.timing.inputs.free_bytes", lambda device: 16 << 30)
    assert not reference_runner.warm_first_call(pool, "cuda:0")  # an 8 GiB problem's like: no call beside it
