"""What each verdict input rests on (docs/trust-boundary.md, evidence; docs/anti-cheating.md, cheat 26), and the rule that a strict-policy
"ok" may not rest on evidence only the runner made.

Every Result says, per input (`Result.evidence`):
    judge         measured by the judge itself: outputs read from shared memory and compared with the reference, the
                  judge's clock around every timed batch
    corroborated  reported by the runner and checked against something the judge measured
    unverified    reported by the runner only; nothing the judge measured could check it
    contradicted  reported by the runner, and what the judge measured says otherwise
    n/a           not part of this verdict (a PyTorch candidate has no launches to count, a CPU run no profiler)

Launches of the candidate's own kernels are counted in the runner (`runner/launches.py`), so a candidate can rewrite
the count. The judge corroborates them:
- on the CPU, by probe calls. Each correctness round calls the candidate twice on the same inputs; the judge makes
  the second a probe call, in which the runner's wrapper of Triton's interpreted launch burns a budget of CPU after
  every launch that returns (`runner/launches.interpreter_probe`, sealed before the candidate is imported). The
  judge reads the runner's CPU time from /proc around both calls: the probe call must cost more by at least
  `CPU_LAUNCH_SHARE` of the budget times the launches the runner reported (median over the pairs). Launches that
  never went through Triton's interpreter (a count written into the runner's log, a rewritten report, an interpreter
  replaced by torch) burn nothing, and the report is `contradicted`. Two calls on the same inputs cost the same but
  for the budget, so the difference stands far above the noise of a shared machine.
- on a GPU, by the profiler: the candidate's own kernels (names from its source, parsed by the judge) must take GPU
  time in a profiled forward, with the runner's seal intact, and the profiled kernels may not take longer than the
  whole call by the judge's clock.
A strict-policy Triton or CUDA candidate is "ok" only with launches corroborated; contradicted launches reject under
any policy (`unverified-evidence`). What this cannot see: a candidate that reads the probe budget out of the
runner's memory and burns it itself in probe calls, or that really launches a kernel doing nothing and then rewrites
the runner's record of what the launch left in its output; on a GPU, one that rewrites the profiler's records. Each
takes reaching into the runner's frames, closures or native code, which the static scan flags in its plain
spellings.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from workbench.eval.checks.flags import Finding
from workbench.eval.checks.runtime import is_own

JUDGE, CORROBORATED, UNVERIFIED, CONTRADICTED, NOT_APPLICABLE = (
    "judge", "corroborated", "unverified", "contradicted", "n/a")
LEVELS = (JUDGE, CORROBORATED, UNVERIFIED, CONTRADICTED, NOT_APPLICABLE)
#: The inputs a Result names, in the order it shows them.
INPUTS = ("outputs", "time", "launches", "coverage")
#: Median share of a probe call's budget (per reported launch) that must show in its CPU time over the same call
#: without the budget. Real launches burn all of it (1.0); half leaves room for a busy machine.
CPU_LAUNCH_SHARE = 0.5
#: A profiled forward's GPU kernels may take at most this multiple of the call's time by the judge's clock, plus
#: `PROFILE_SLACK_MS` (work on several streams overlaps; the profiler's own records are not free).
PROFILE_MULTIPLE = 2.0
PROFILE_SLACK_MS = 0.1


@dataclass
class Evidence:
    """Level per verdict input (`INPUTS`) and how each was established, in words."""

    levels: dict[str, str] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, level: str, how: str = "") -> None:
        assert level in LEVELS, level
        self.levels[name] = level
        if how:
            self.how[name] = how


@dataclass(frozen=True)
class ProbePair:
    """An ordinary call and the probe call after it on the same inputs, as the judge measured them: the runner's CPU
    seconds during each (or the judge's wall-clock brackets where /proc gives no CPU time), the launches the runner
    reported for the probe call, and the budget it had the runner burn per launch."""

    ordinary_s: float
    probe_s: float
    launches: int
    budget_s: float


def interpreted_launches(pairs: list[ProbePair], basis: str) -> tuple[str, str]:
    """(level, how) for the launches reported on the CPU, from probe pairs (module doc)."""
    counted = [p for p in pairs if p.launches > 0 and p.budget_s > 0]
    if not counted:
        return UNVERIFIED, "no probe call measured"
    shares = [(p.probe_s - p.ordinary_s) / (p.launches * p.budget_s) for p in counted]
    share = statistics.median(shares)
    launches = statistics.median(p.launches for p in counted)
    extra = statistics.median(p.probe_s - p.ordinary_s for p in counted)
    due = statistics.median(p.launches * p.budget_s for p in counted)
    how = (f"{launches:g} interpreted launch(es) per call reported; in {len(counted)} probe call(s) the runner's "
           f"{basis} rose by {extra * 1e3:.2f} ms where those launches owed {due * 1e3:.2f} ms "
           f"({max(share, 0.0):.0%})")
    return (CORROBORATED if share >= CPU_LAUNCH_SHARE else CONTRADICTED), how


def profiled_launches(kernels: dict[str, float] | None, own: set[str], tampered: tuple[str, ...],
                      call_ms: float | None) -> tuple[str, str]:
    """(level, how) for the candidate's launches on a GPU from one profiled forward (module doc); `call_ms` is the
    call's time as the verdict has it, never under the judge's clock."""
    if kernels is None:
        return UNVERIFIED, "no profiled forward"
    if tampered:
        return CONTRADICTED, f"the profiler's hook points were replaced ({', '.join(tampered[:3])})"
    total = sum(kernels.values())
    mine = sum(us for name, us in kernels.items() if is_own(name, own))
    if mine <= 0:
        return CONTRADICTED, "the profiled forward ran none of the candidate's own kernels"
    if call_ms is not None and total / 1e3 > PROFILE_MULTIPLE * call_ms + PROFILE_SLACK_MS:
        return CONTRADICTED, (f"the profiled kernels took {total / 1e3:.3f} ms, more than the whole call takes "
                              f"({call_ms:.3f} ms, at least the judge's clock)")
    return CORROBORATED, (f"profiler: {100 * mine / total:.0f}% of {total:.0f} us of GPU kernel time in the "
                          "candidate's own kernels (names parsed from its source by the judge)")


def findings(evidence: Evidence, policy: str, language: str) -> list[Finding]:
    """Contradicted launches reject under any policy; under the strict policy a Triton or CUDA candidate's reported
    launches must be corroborated (a candidate that reported none is a decoy, which `judge_launches` says)."""
    level = evidence.levels.get("launches", UNVERIFIED)
    how = evidence.how.get("launches", "")
    if level == CONTRADICTED:
        return [Finding("unverified-evidence", f"the runner's launch report does not match what the judge measured: "
                                               f"{how}")]
    if policy == "strict" and language in ("triton", "cuda") and level == UNVERIFIED:
        detail = f"launches {level}" + (f": {how}" if how else "")
        return [Finding("unverified-evidence", f"{detail}; the strict policy needs launches the judge corroborated")]
    return []


def summary(levels: dict[str, str]) -> str:
    """'outputs judge · time judge · launches corroborated' (the inputs this verdict has, in `INPUTS` order)."""
    names = [n for n in INPUTS if n in levels] + [n for n in levels if n not in INPUTS]
    return " · ".join(f"{n} {levels[n]}" for n in names)
