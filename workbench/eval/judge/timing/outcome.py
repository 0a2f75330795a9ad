"""A `PairTimer`'s rounds as a `TimingOutcome`: the timings (the runner's clock where the judge's verified it, else
the judge's clock on both sides), the clock check's and the CPU watch's findings, and the timing's protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.eval.checks.flags import Finding
from workbench.eval.checks.runtime import judge_cpu_share
from workbench.eval.judge.timing import clock_check, stats
from workbench.result import Timing

if TYPE_CHECKING:
    from workbench.eval.judge.timing.pair import PairTimer

#: The two sides whose medians make the speedup.
PAIR = ("reference", "candidate")


@dataclass
class TimingOutcome:
    """What timing found (`candidate`/`reference` None when a check stopped it before a batch counted)."""

    candidate: Timing | None
    reference: Timing | None
    compiled: Timing | None = None
    judge_clock: Timing | None = None
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    protocol: dict[str, Any] = field(default_factory=dict)


def outcome_of(timer: PairTimer, reasons: dict[str, str]) -> TimingOutcome:
    verdict = clock_check.judge(timer.batches, timer.null, clock_check.GROSS_SHORTFALL["cuda" if timer.cuda else "cpu"])
    timings: dict[str, Timing] = {}
    calls = sum(b.calls for b in timer.batches)
    for name in timer.names:
        side_runs = 0
        values = timer.stream[name]
        if timer.cuda and timer._side_stream(name):
            values, side_runs = timer.device_ms[name], len(timer.device_ms[name])
        if not verdict.verified and name in PAIR:
            # Never under the device's figure: a harness estimate that came out high must not make J ~0.
            values = [max(j, m) for j, m in zip(timer.judged[name], values, strict=False)]
            side_runs = 0
        values = [max(v, 1e-9) for v in values]
        if values:
            t = stats.summarize(values, timer.clock, side_runs, stop_reason=reasons.get(name, ""))
            t.n = calls if name in PAIR else timer.compiled_calls  # calls, not batches: samples are batch means
            timings[name] = t
    if "candidate" not in timings:
        if timer._caught():
            return TimingOutcome(candidate=None, reference=None, findings=list(timer.findings))
        raise RuntimeError("every timed batch was dropped (the GPU was throttled throughout)")
    timer.findings += verdict.findings + judge_cpu_share(timer.cpu_batches, timer.whole_cpu())
    judge = [clock_check.judge_time(b, timer.null) * 1e3 for b in timer.batches]
    outcome = TimingOutcome(timings["candidate"], timings["reference"], compiled=timings.get("compiled"),
                            judge_clock=stats.summarize(judge, "judge-clock", stop_reason="") if judge else None,
                            findings=list(timer.findings))
    if outcome.candidate.side_stream_runs:
        outcome.findings.append(Finding("side-stream", "work ran on another stream; the candidate was timed to "
                                                       "the device synchronize"))
    basis = "runner clock, bounded by the judge's clock" if verdict.verified else "the judge's clock"
    outcome.protocol.update(timing_input_sets=timer.pool.n, checked_timed_calls=timer.checked,
                            dropped_batches=timer.dropped, timed_batches=len(timer.batches),
                            candidate_first_batches=timer.candidate_first, memory_released_rounds=timer.released,
                            calls_per_batch=timer.batches[-1].calls if timer.batches else 0,
                            harness=timer.null.to_dict(), judge_harness=timer.calibration.judge.to_dict(),
                            clock_check=verdict.to_dict(), timing_basis=basis,
                            warmup_rounds=timer.warmup_rounds,
                            timing_phases={k: round(v, 3) for k, v in timer.phases.items()})
    if timer.reference_fallback:
        outcome.protocol["reference_timed_in"] = f"judge: {timer.reference_fallback}"
        outcome.notes.append("the reference's runner failed during timing; the judge timed the reference in its "
                             f"own process from then on ({timer.reference_fallback[:200]})")
    if verdict.disagreed:
        outcome.notes.append("the runner's clock did not agree with the judge's (a busy host, or a clock the "
                             "candidate changed): both sides were timed by the judge's clock")
    if timer.pool.fixed_inputs:
        outcome.notes.append("the task's inputs do not change with the seed, so timed calls repeat contents: a "
                             "result cached by content would not be caught on this task")
    return outcome
