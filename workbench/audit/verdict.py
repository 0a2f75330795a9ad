"""Whether a published claim survives an honest re-measurement, and why (docs/audit.md, "What survives means").

The claim is judged on the evaluation under the precision it was measured under; a second evaluation under IEEE
fp32, when that precision differs, tells a real speedup from one that exists only because the kernel computes in
less precision. In order, the first that applies decides:

    not evaluated (no problem, a load error)       n/a   the row's error
    rejected                                       no    rejected [flags]
    incorrect (or compile/runtime error, ...)      no    incorrect [flags]; a TF32 or bf16 pattern is named
    weak-task                                      no    the problem cannot tell right from wrong
    correct under the claim's precision only       no    precision-only win
    no comparable time (the CPU interpreter)       n/a   correct, speed not compared
    speedup CI too wide                            n/a   inconclusive
    claimed speedup above the CI's upper end       no    slower than claimed beyond CI
    no claimed number and not "faster"             no    not faster
    otherwise                                      yes   the CI covers or beats the claim
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.result import Result

__all__ = ["ClaimVerdict", "judge_claim", "SURVIVES"]

#: Values of the `survives` column.
SURVIVES = ("yes", "no", "n/a")
_PRECISION_PATTERN = re.compile(r"errors match (\w+) rounding")


@dataclass(frozen=True)
class ClaimVerdict:
    survives: str
    why: str


def _speedup_text(result: Result) -> str:
    if result.speedup is None:
        return "-"
    ci = f" [{result.speedup_ci[0]:.2f}, {result.speedup_ci[1]:.2f}]" if result.speedup_ci else ""
    return f"{result.speedup:.2f}x{ci}"


def _failure(result: Result, name_precision: bool = True) -> str:
    flags = f" [{', '.join(result.flags)}]" if result.flags else ""
    why = f"{result.status.replace('_', ' ')}{flags}"
    pattern = _PRECISION_PATTERN.search(result.message or "")
    if pattern and name_precision:
        why += f": its errors match {pattern.group(1)} rounding (a precision-only win)"
    return why


def judge_claim(claimed: float | None, precision: str, at_claim: Result | None, at_ieee: Result | None,
                error: str = "") -> ClaimVerdict:
    """The verdict on one claim: `at_claim` evaluated under `precision`, `at_ieee` under IEEE (the same Result when
    `precision` is "ieee"), `error` why nothing was evaluated."""
    if at_claim is None:
        return ClaimVerdict("n/a", f"not evaluated: {error or 'no result'}")
    if at_claim.status == "cancelled":
        return ClaimVerdict("n/a", "not evaluated: cancelled")
    if at_claim.status != "ok":
        return ClaimVerdict("no", _failure(at_claim))
    if "weak-task" in at_claim.warnings:
        return ClaimVerdict("no", "weak-task: the problem cannot tell right from wrong (its reference output is "
                                  "near-constant or ignores an input), so no speedup on it is evidence")
    if at_ieee is not None and at_ieee is not at_claim and at_ieee.status not in ("ok", "cancelled"):
        return ClaimVerdict("no", f"precision-only win: correct under {precision}, {_failure(at_ieee, False)} under ieee")
    if at_claim.speedup is None:
        clock = at_claim.timing.clock if at_claim.timing else None
        where = "on Triton's CPU interpreter" if clock == "interpreter" else "(not timed)"
        return ClaimVerdict("n/a", f"correct; speed not compared {where}: audit on a GPU")
    measured = _speedup_text(at_claim)
    verdict = at_claim.speedup_verdict
    high = at_claim.speedup_ci[1] if at_claim.speedup_ci else at_claim.speedup
    if claimed is not None and high < claimed:
        return ClaimVerdict("no", f"slower than claimed beyond CI: claimed {claimed:.2f}x, measured {measured}")
    if verdict == "inconclusive":
        return ClaimVerdict("n/a", f"inconclusive: measured {measured}, too wide to confirm or refute; rerun on a "
                                   "quieter GPU")
    if claimed is None and verdict != "faster":
        return ClaimVerdict("no", f"not faster: measured {measured} ({verdict})")
    if claimed is None:
        return ClaimVerdict("yes", f"faster: measured {measured}")
    return ClaimVerdict("yes", f"measured {measured} covers or beats the claimed {claimed:.2f}x")
