"""The judge's clock is the measurement (docs/anti-cheating.md, cheats 23 and 24): it brackets every timed batch and
charges the candidate with everything inside, less the harness fitted on null batches before the import (`NullFit`):
J = (bracket - fixed - per_call * calls) / calls. The runner's mean E may fall below J only by the launch overhead
plus noise; a larger deficit puts both sides on the judge's clock, a gross one (GROSS_SHORTFALL) is `timer-patch`.
On the CPU a gross deficit must also show in the CPU seconds the runner's threads used (read from /proc by the judge):
a busy host's late wake-ups stretch the bracket without adding CPU work, a forged clock hides work that still ran."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from workbench.eval.checks.flags import Finding

#: Share of J that E may fall short of beyond the launch overhead and noise: timer jitter, clock-rate changes.
RELATIVE_SLACK = 0.1
#: Absolute per-call slack (seconds): a launch-bound kernel's host work the runner's clock does not see.
ABSOLUTE_SLACK_S = 5e-6


@dataclass(frozen=True)
class NullFit:
    """The harness cost per batch, `fixed + per_call * calls` seconds; `noise` the null batches' spread around the
    line, `launch` the extra per-call cost of launching a null kernel (0 on the CPU)."""

    fixed: float
    per_call: float
    noise: float
    launch: float = 0.0
    points: int = 0

    def overhead(self, calls: int) -> float:
        return self.fixed + self.per_call * calls

    @classmethod
    def fit(cls, points: list[tuple[int, float]], launch: float = 0.0) -> NullFit:
        """Least squares over (calls, seconds) of null batches, both terms at least 0."""
        if not points:
            return cls(0.0, 0.0, 0.0, launch, 0)
        xs = [float(c) for c, _ in points]
        ys = [s for _, s in points]
        if len(set(xs)) < 2:
            mean = sum(ys) / len(ys)
            return cls(max(0.0, mean), 0.0, statistics.pstdev(ys) if len(ys) > 1 else 0.0, launch, len(points))
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx)
        intercept = max(0.0, my - slope * mx)
        residuals = [y - intercept - slope * x for x, y in zip(xs, ys, strict=True)]
        # A robust spread (scaled MAD): one disturbed null batch must not widen every allowance.
        center = statistics.median(residuals)
        noise = 1.4826 * statistics.median(abs(r - center) for r in residuals)
        return cls(intercept, slope, noise, max(0.0, launch), len(points))

    def to_dict(self) -> dict[str, float]:
        return {"fixed_ms": self.fixed * 1e3, "per_call_ms": self.per_call * 1e3, "noise_ms": self.noise * 1e3,
                "launch_ms": self.launch * 1e3, "points": self.points}


@dataclass(frozen=True)
class Batch:
    """One timed batch of the candidate: calls, the judge's bracket (s), the runner's reported mean (s) and, on the
    CPU, the seconds the runner's threads ran during the bracket (None where not read)."""

    calls: int
    bracket: float
    reported_mean: float
    cpu: float | None = None


def judge_time(batch: Batch, null: NullFit) -> float:
    """J: seconds per call by the judge's clock, the harness taken out."""
    return max(0.0, (batch.bracket - null.overhead(batch.calls)) / batch.calls)


def cpu_time(batches: list[Batch], null: NullFit) -> float | None:
    """The median CPU seconds per call the runner's threads worked, less the whole harness (an undercount: the
    harness's wall cost includes the judge's side); None unless every batch was read."""
    if not batches or any(b.cpu is None for b in batches):
        return None
    return statistics.median(max(0.0, ((b.cpu or 0.0) - null.overhead(b.calls)) / b.calls) for b in batches)


#: A report this many times under J is `timer-patch` (beyond any harness misfit or a loaded CPU host's wake-up delays).
GROSS_SHORTFALL = {"cpu": 4.0, "cuda": 2.0}

#: The runner's figures are verified when three standard errors of the judge's J are at most this share of J.
VERIFIABLE_SHARE = 0.25


@dataclass(frozen=True)
class ClockVerdict:
    """What the judge's clock says of the runner's reported times (all per call, seconds)."""

    findings: list[Finding]
    verified: bool
    judge: float
    reported: float
    standard_error: float
    disagreed: bool = False  # the reports fell further below J than the slack allows, where that is not flagged (CPU)

    def to_dict(self) -> dict[str, float | bool]:
        return {"verified": self.verified, "judge_ms": self.judge * 1e3, "reported_ms": self.reported * 1e3,
                "standard_error_ms": self.standard_error * 1e3, "disagreed": self.disagreed}


def _slack(per_call: float, se: float, null: NullFit) -> float:
    return 2 * null.launch + ABSOLUTE_SLACK_S + RELATIVE_SLACK * per_call + 3 * se


def judge(batches: list[Batch], null: NullFit, gross_shortfall: float = GROSS_SHORTFALL["cuda"]) -> ClockVerdict:
    """`timer-patch` when a batch reports more than its bracket, or the median report is `gross_shortfall` times
    under J; a smaller deficit beyond the slack sets `disagreed`; `verified` when J was precise enough to tell."""
    for b in batches:
        if b.reported_mean * b.calls > b.bracket * 1.02 + 5e-4:
            finding = Finding("timer-patch", f"the runner reported {b.reported_mean * b.calls * 1e3:.3f} ms of work in "
                                             f"a batch the judge's clock measured at {b.bracket * 1e3:.3f} ms")
            return ClockVerdict([finding], False, 0.0, b.reported_mean, 0.0)
    if not batches:
        return ClockVerdict([], False, 0.0, 0.0, 0.0)
    j = statistics.median(judge_time(b, null) for b in batches)
    e = statistics.median(b.reported_mean for b in batches)
    deficit = statistics.median(judge_time(b, null) - b.reported_mean for b in batches)
    se = 1.253 * null.noise / statistics.median(b.calls for b in batches) / len(batches) ** 0.5
    slack = _slack(j, se, null)
    worked = cpu_time(batches, null)
    gross = e * gross_shortfall < j - slack and \
        (worked is None or e * gross_shortfall < worked - _slack(worked, se, null))
    if deficit > slack and not gross:
        return ClockVerdict([], False, j, e, se, disagreed=True)
    if deficit > slack:
        finding = Finding("timer-patch", f"by the judge's clock a timed call costs {j * 1e3:.4f} ms beyond the "
                                         f"harness, but the runner reported {e * 1e3:.4f} ms (medians over "
                                         f"{len(batches)} batches)")
        return ClockVerdict([finding], False, j, e, se)
    return ClockVerdict([], 3 * se <= VERIFIABLE_SHARE * max(j, e), j, e, se)


def check(batches: list[Batch], null: NullFit, gross_shortfall: float = GROSS_SHORTFALL["cuda"]) -> list[Finding]:
    return judge(batches, null, gross_shortfall).findings
