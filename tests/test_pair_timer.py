"""The timing rounds with a real runner on the CPU (`judge/timing.PairTimer`): what each side is timed on and when
timing stops."""

from __future__ import annotations

import dataclasses

import workbench as wb
from workbench.eval.judge import timing_stage
from workbench.eval.judge.candidate_session import CandidateSession
from workbench.eval.judge.reference_rounds import build_reference
from workbench.eval.judge.runner_handle import ForkServer, RunnerProcess
from workbench.eval.judge.timing import PairTimer, ReferenceSide, stopping_rule
from workbench.tasks.kernelbench import reference_as_candidate
from workbench.tasks.task import LoadedReference


def test_the_compiled_reference_is_an_aside_timed_in_every_other_round(tmp_path):
    """torch.compile of the reference (here any callable stands for it: the judge compiles only on a GPU) is timed in
    both warm-up rounds and every other counted round, and timing stops on the reference and the candidate alone:
    the aside costs half of what it did and never holds a verdict up."""
    task = wb.get_task("softmax")
    size = task.sizes["cpu"]
    ref = LoadedReference(task, str(tmp_path))
    model = build_reference(ref, size, "cpu", 0)
    compiled_calls = []

    def compiled(*xs):
        compiled_calls.append(1)
        return model(*xs)

    server = ForkServer("cpu")
    try:
        with RunnerProcess.start(server, "cpu") as runner:
            session = CandidateSession(runner, "cpu", 60.0)
            plan, _ = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False)
            cand = reference_as_candidate(task)
            session.load(cand.source, "torch", "ModelNew", task.precision.to_spec(), 60.0)
            remote = session.model(model, ref.init_inputs(size, 0), 0, {**ref.defaults, **size})
            side = ReferenceSide(model, compiled, task.tolerance, 0.0)
            # The CPU rule, with room for its ten batches: its 1.5 s cap is about a round's input draws and calls
            # on a busy 2-core machine (9 batches in one run), and what is tested here is the aside's schedule.
            rule = dataclasses.replace(stopping_rule("cpu", False, None), time_cap_s=60.0)
            timer = PairTimer(session, remote.model_id, side, plan.pool, plan.calibration, rule, "cpu", "wall",
                              seeded=plan.seeded)
            outcome = timer.run()
            session.close()
    finally:
        server.close()
    counted = outcome.protocol["timed_batches"]
    assert counted >= 10 and not [f.flag for f in outcome.findings], (counted, outcome.candidate.stop_reason, outcome.protocol["timing_phases"], outcome.findings)
    assert outcome.compiled is not None and outcome.compiled.stop_reason == "with-pair"
    assert len(outcome.compiled.samples_ms) == (counted + 1) // 2  # rounds 2, 4, 6, ...
    assert len(outcome.candidate.samples_ms) == len(outcome.reference.samples_ms) == counted
    assert outcome.candidate.stop_reason and outcome.candidate.stop_reason != "with-pair"
    assert 0 < outcome.compiled.n < outcome.candidate.n == outcome.reference.n
    warmup_calls = 2 * min(plan.pool.n, 2)
    assert len(compiled_calls) == warmup_calls + outcome.compiled.n
