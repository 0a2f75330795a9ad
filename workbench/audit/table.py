"""The audit table: one row per published kernel, its claim beside the honest verdict (docs/audit.md lists the
columns), and the few lines that summarise it."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from workbench.audit.release import AuditEntry
from workbench.audit.verdict import judge_claim
from workbench.eval.checks.flags import FLAGS
from workbench.result import Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "audit_row", "audit_frame", "summary"]

#: The table's columns, in order.
COLUMNS = (
    "kernel", "problem", "level", "source", "claimed_speedup", "claim_precision",
    "status", "flags", "warnings", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_verdict",
    "status_ieee", "speedup_ieee", "speedup_ieee_ci_low", "speedup_ieee_ci_high", "speedup_verdict_ieee",
    "sol_fraction", "coverage", "clock", "device", "survives", "why", "notes", "message",
)


def _speed(result: Result | None, suffix: str) -> dict[str, Any]:
    ci = result.speedup_ci if result is not None and result.speedup_ci else (None, None)
    return {f"speedup{suffix}": result.speedup if result is not None else None,
            f"speedup{suffix}_ci_low": ci[0], f"speedup{suffix}_ci_high": ci[1]}


def _first_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def audit_row(entry: AuditEntry, problem: str, precision: str, at_claim: Result | None, at_ieee: Result | None,
              error: str = "") -> dict[str, Any]:
    """One row of the table: the claim, the evaluation under its precision, the one under IEEE, the verdict."""
    verdict = judge_claim(entry.claimed_speedup, precision, at_claim, at_ieee, error)
    ci = _speed(at_claim, "")
    return {
        "kernel": entry.key, "problem": problem, "level": entry.level, "source": entry.source,
        "claimed_speedup": entry.claimed_speedup, "claim_precision": precision,
        "status": at_claim.status if at_claim is not None else "not-evaluated",
        "flags": ",".join(at_claim.flags) if at_claim is not None else "",
        "warnings": ",".join(w for w in (at_claim.warnings if at_claim is not None else []) if w in FLAGS),
        "speedup": ci["speedup"], "speedup_ci_low": ci["speedup_ci_low"], "speedup_ci_high": ci["speedup_ci_high"],
        "speedup_verdict": at_claim.speedup_verdict if at_claim is not None else None,
        "status_ieee": at_ieee.status if at_ieee is not None else None,
        **_speed(at_ieee, "_ieee"),
        "speedup_verdict_ieee": at_ieee.speedup_verdict if at_ieee is not None else None,
        "sol_fraction": at_claim.sol_fraction if at_claim is not None else None,
        "coverage": at_claim.coverage if at_claim is not None else None,
        "clock": at_claim.timing.clock if at_claim is not None and at_claim.timing else None,
        "device": at_claim.device if at_claim is not None else None,
        "survives": verdict.survives, "why": verdict.why, "notes": "; ".join(entry.notes),
        "message": _first_line(at_claim.message if at_claim is not None else error),
    }


def audit_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame with the table's columns, numbers as floats."""
    import pandas as pd

    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    for column in ("claimed_speedup", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_ieee",
                   "speedup_ieee_ci_low", "speedup_ieee_ci_high", "sol_fraction", "coverage"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["level"] = pd.to_numeric(frame["level"], errors="coerce").astype("Int64")
    return frame


def summary(frame: pd.DataFrame) -> str:
    """'12 kernels: 3 survive, 7 do not, 2 n/a' and the reasons, most common first."""
    counts = Counter(frame["survives"])
    head = (f"{len(frame)} kernels: {counts.get('yes', 0)} survive, {counts.get('no', 0)} do not, "
            f"{counts.get('n/a', 0)} n/a")
    reasons = Counter(str(why).split(":")[0].split(" [")[0] for why in frame.loc[frame["survives"] != "yes", "why"])
    lines = [head] + [f"  {n:4d}  {reason}" for reason, n in reasons.most_common()]
    return "\n".join(lines)
