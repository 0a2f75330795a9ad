"""The timing rounds (`judge/timing.PairTimer`) on the CPU, the candidate in a scripted runner (`tests/fake_runner.py`):
what each side is timed on and when timing stops."""

from __future__ import annotations

import dataclasses

import torch
from fake_runner import FakeForkServer, FakeRunner, Script, one_thread

import workbench as wb
from workbench.eval.judge.reference.rounds import build_reference
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing import stage as timing_stage
from workbench.eval.judge.timing.pair import PairTimer, ReferenceSide, stopping_rule
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

    # The candidate: the reference's math at 2 ms a call, by its runner's clock and the judge's alike.
    candidate = FakeRunner.scripted(Script(forward=lambda x: torch.softmax(x, dim=-1), ms=2.0))
    server = FakeForkServer("cpu")
    try:
        with one_thread(), candidate.start(server, "cpu") as runner:
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


class _ScriptedRounds(PairTimer):
    """PairTimer's stopping with scripted rounds in place of timed batches (`_round` is its one measurement): each
    round's reference and candidate means come from `script(k)`; everything that decides when to stop is real."""

    def __init__(self, script, cap_s: float = 2.0):
        from workbench.eval.judge.timing.stats import StoppingRule

        self.cuda, self.findings, self.names = True, [], ["reference", "candidate"]
        self.stream = {n: [] for n in self.names}
        self.device_ms = {n: [] for n in self.names}
        self.script, self.rounds = script, 0
        self.rule = StoppingRule(target_rel_ci=0.01, min_samples=10, max_samples=200, time_cap_s=cap_s)

    def _round(self, b, n, count):
        ref, cand = self.script(self.rounds)
        self.rounds += 1
        for name, v in (("reference", ref), ("candidate", cand)):
            self.stream[name].append(v)
            self.device_ms[name].append(v)
        return {"reference": ref, "candidate": cand}


def _first_rounds(timer: _ScriptedRounds):
    """The MIN_BATCHES counted rounds `_run` starts with, 10 ms each, fed to a new joint stopper (returned)."""
    from workbench.eval.judge.timing.pair import MIN_BATCHES, PAIR

    stopper = timer.rule.start_joint(PAIR)
    for k in range(MIN_BATCHES):
        got = timer._round(k, 1, True)
        stopper.add({m: [got[m]] for m in PAIR}, 0.01)
    return stopper


def _outliers_apart(k: int) -> tuple[float, float]:
    """Identical code whose sides each have one slow and one fast round in ten, in different rounds: each side's
    median is tight (its CI within 1% at ten rounds), while four ratios in ten are 8% off."""
    jitter = 1.0 + 0.0005 * (k % 3)
    ref = jitter * {0: 1.08, 5: 0.92}.get(k % 10, 1.0)
    cand = jitter * {2: 1.08, 7: 0.92}.get(k % 10, 1.0)
    return ref, cand


def test_sides_settled_with_the_verdict_open_get_more_rounds_until_it_settles():
    """Each side reaches its 1% CI target at ten batches while the median of ten swinging ratios is too uncertain
    for a verdict: timing goes on (`PairTimer._settle`) until the paired verdict settles, not past SETTLE_BATCHES."""
    from workbench.eval.judge import verdict
    from workbench.eval.judge.timing.pair import MIN_BATCHES, SETTLE_BATCHES

    timer = _ScriptedRounds(_outliers_apart)
    stopper = _first_rounds(timer)
    assert all(r == "ci-target" for r in stopper.reasons.values())
    assert verdict.speedup(timer.stream["reference"], timer.stream["candidate"], paired=True).verdict == "inconclusive"
    assert timer._unsettled(stopper)
    r, decided = timer._settle(stopper, MIN_BATCHES, 1)
    got = verdict.speedup(timer.stream["reference"], timer.stream["candidate"], paired=True)
    assert decided == "verdict" and got.verdict == "same" and MIN_BATCHES < timer.rounds <= SETTLE_BATCHES
    assert not timer._unsettled(stopper)


def test_settling_stops_at_its_batch_bound_and_at_the_time_cap():
    from workbench.eval.judge.timing.pair import MIN_BATCHES, SETTLE_BATCHES

    def undecidable(k: int) -> tuple[float, float]:  # 3% slower: right on the band's edge, round after round
        ref = 1.0 + 0.0005 * (k % 3)
        return ref, 1.03 * ref * (1.0 + 0.001 * ((k * 7) % 5 - 2))

    for cap, most in ((100.0, SETTLE_BATCHES), (0.05, MIN_BATCHES)):  # ten rounds of 10 ms are past 0.05 s
        timer = _ScriptedRounds(undecidable, cap_s=cap)
        stopper = _first_rounds(timer)
        _, decided = timer._settle(stopper, MIN_BATCHES, 1)
        assert decided == "" and timer.rounds <= most


def test_on_the_cpu_or_with_a_settled_verdict_no_round_is_added():

    timer = _ScriptedRounds(lambda k: (1.0 + 0.0001 * k, 1.0 + 0.0001 * k))
    stopper = _first_rounds(timer)
    assert not timer._unsettled(stopper)  # "same" already
    swinging = _ScriptedRounds(_outliers_apart)
    swinging.cuda = False
    stopper = _first_rounds(swinging)
    assert not swinging._unsettled(stopper)  # the CPU keeps its rules
