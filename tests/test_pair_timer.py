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


class _SyntheticRounds(PairTimer):
    """The timing loop on synthetic rounds: each side's batch mean drawn around `ratio` with relative noise `noise`
    (no runner), each round costing `round_s` of wall time; `swing` instead moves the two batch means by +-noise
    in turn, opposite ways, so the interval never narrows. What is tested is when the loop stops."""

    def __init__(self, rule, ratio: float, noise: float, round_s: float, extension: float, seed: int = 0,
                 swing: bool = False):
        from types import SimpleNamespace

        super().__init__(session=None, model_id=0, reference=ReferenceSide(model=None), pool=SimpleNamespace(n=64),
                         calibration=SimpleNamespace(runner=None), rule=rule, device="cuda", clock="wall",
                         verdict_extension=extension)
        import random

        self.draw = random.Random(seed)
        self.ratio, self.noise, self.round_s, self.swing = ratio, noise, round_s, swing
        self.rounds = 0

    def _round(self, b, n, count):
        import time

        time.sleep(self.round_s)
        if self.swing:
            sign = (-1) ** self.rounds
            got = {"reference": self.ratio * (1 + self.noise * sign), "candidate": 1 - self.noise * sign}
        else:
            got = {"reference": self.ratio * (1 + self.draw.gauss(0, self.noise)),
                   "candidate": 1 + self.draw.gauss(0, self.noise)}
        if count:
            self.rounds += 1
            for name, value in got.items():
                self.stream[name].append(value)
                self.device_ms[name].append(value)
        return got

    def _outcome(self, reasons):
        return reasons


def _gpu_rule(cap_s: float):
    return dataclasses.replace(stopping_rule("cuda", False, None), time_cap_s=cap_s, target_rel_ci=0.0,
                               plateau_batches=0)


def test_an_inconclusive_verdict_at_the_time_cap_buys_rounds_until_it_settles():
    """Identical sides, noisy enough that the cap comes first: without the extension the rule stops at the cap;
    with it timing goes on, past the cap, until the paired verdict is "same" (within extension x cap)."""
    plain = _SyntheticRounds(_gpu_rule(0.25), ratio=1.0, noise=0.08, round_s=0.01, extension=0.0)
    reasons = plain._run()
    assert set(reasons.values()) == {"time-cap"} and plain._verdict() == "inconclusive", plain.rounds
    assert plain.extended_s == 0.0
    extended = _SyntheticRounds(_gpu_rule(0.25), ratio=1.0, noise=0.08, round_s=0.01, extension=20.0)
    reasons = extended._run()
    assert set(reasons.values()) == {"verdict"}, (reasons, extended.rounds)
    assert extended._verdict() == "same" and extended.rounds > plain.rounds and extended.rounds % 2 == 0
    assert 0 < extended.extended_s < 20.0 * 0.25


def test_the_extension_is_bounded_and_a_settled_verdict_buys_nothing():
    """Rounds whose ratio swings across the band's edge never settle: the extension spends its budget (one more cap)
    and stops at "time-cap". A clear win settles before the cap and never extends."""
    edge = _SyntheticRounds(_gpu_rule(0.2), ratio=1.02, noise=0.1, round_s=0.01, extension=1.0, swing=True)
    reasons = edge._run()
    assert set(reasons.values()) == {"time-cap"} and edge._verdict() == "inconclusive"
    assert 0.2 <= edge.extended_s < 0.2 + 0.1
    win = _SyntheticRounds(_gpu_rule(10.0), ratio=1.5, noise=0.01, round_s=0.0, extension=1.0)
    reasons = win._run()
    assert win._verdict() == "faster" and win.extended_s == 0.0 and "time-cap" not in reasons.values()
