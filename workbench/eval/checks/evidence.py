"""What each verdict input rests on (docs/anti-cheating.md, cheat 26): `judge`, `corroborated` (a runner report checked
by a judge measurement), `unverified`, `contradicted` or `n/a`. Launches are corroborated on the CPU by a probe call's
extra CPU time (`CPU_LAUNCH_SHARE` per launch), on a GPU by a profiled forward with the seal intact. A strict candidate
in a compiled language is "ok" only with launches corroborated; contradicted launches reject under any policy."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from workbench import languages
from workbench.eval.checks.flags import Finding
from workbench.eval.checks.runtime import is_own

JUDGE, CORROBORATED, UNVERIFIED, CONTRADICTED, NOT_APPLICABLE = (
    "judge", "corroborated", "unverified", "contradicted", "n/a")
LEVELS = (JUDGE, CORROBORATED, UNVERIFIED, CONTRADICTED, NOT_APPLICABLE)
#: The inputs a Result names, in the order it shows them.
INPUTS = ("outputs", "time", "launches", "coverage")
#: Median share of a probe's per-launch budget that must show in its extra CPU time.
CPU_LAUNCH_SHARE = 0.5
#: Most a profiled forward's kernels may take: this multiple of the call's time plus the slack.
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
    """A probe call against its ordinary baseline (the cheapest earlier call of the model on inputs of the same shapes):
    the runner's seconds in each, the probe's launches and budget."""

    ordinary_s: float
    probe_s: float
    launches: int
    budget_s: float


def interpreted_launches(pairs: list[ProbePair], basis: str) -> tuple[str, str]:
    """(level, how) for the launches reported on the CPU, from probe pairs."""
    counted = [p for p in pairs if p.launches > 0 and p.budget_s > 0]
    if not counted:
        return UNVERIFIED, "no probe call measured"
    share = statistics.median((p.probe_s - p.ordinary_s) / (p.launches * p.budget_s) for p in counted)
    launches = statistics.median(p.launches for p in counted)
    extra = statistics.median(p.probe_s - p.ordinary_s for p in counted)
    due = statistics.median(p.launches * p.budget_s for p in counted)
    how = (f"{launches:g} interpreted launch(es) per call reported; in {len(counted)} probe call(s) the runner's "
           f"{basis} rose by {extra * 1e3:.2f} ms where those launches owed {due * 1e3:.2f} ms "
           f"({max(share, 0.0):.0%})")
    return (CORROBORATED if share >= CPU_LAUNCH_SHARE else CONTRADICTED), how


def profiled_launches(kernels: dict[str, float] | None, own: set[str], tampered: tuple[str, ...],
                      call_ms: float | None) -> tuple[str, str]:
    """(level, how) for the launches on a GPU from one profiled forward."""
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
    """Contradicted launches reject; the strict policy needs a compiled language's launches corroborated."""
    level = evidence.levels.get("launches", UNVERIFIED)
    how = evidence.how.get("launches", "")
    if level == CONTRADICTED:
        return [Finding("unverified-evidence", f"the runner's launch report does not match what the judge measured: "
                                               f"{how}")]
    if policy == "strict" and languages.get(language).compiled and level == UNVERIFIED:
        detail = f"launches {level}" + (f": {how}" if how else "")
        return [Finding("unverified-evidence", f"{detail}; the strict policy needs launches the judge corroborated")]
    return []


def summary(levels: dict[str, str]) -> str:
    """'outputs judge · time judge · launches corroborated', in `INPUTS` order."""
    names = [n for n in INPUTS if n in levels] + [n for n in levels if n not in INPUTS]
    return " · ".join(f"{n} {levels[n]}" for n in names)
