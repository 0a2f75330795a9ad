"""The error budget's pieces both output comparisons use (`output_compare.py` whole, `output_compare_chunked.py` a
slice at a time): the thresholds, the native error E, and one output's budget record. Kept apart so the two
comparisons share them without importing each other.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.tasks.task import Tolerance

#: An output with at least this share of its elements unwritten (or stale) was returned without being computed.
STALE_SHARE = 0.5

#: degenerate-output: the output's spread is below this fraction of the reference's.
DEGENERATE_RATIO = 1e-2

#: The reference's variation must exceed this many units in the last place of its dtype to be told apart.
RESOLVABLE_ULPS = 4

#: The error budget's k: a candidate may be this many times less accurate than the reference run natively
#: (normwise per output, see `output_compare`'s module doc). Chosen from measurements: docs/verdicts.md.
ERROR_BUDGET_K = 16.0


def budget_entry(tol: Tolerance, k: float, native_error: float, worst: float, max_tol_bound: float,
                 fallback: bool) -> dict[str, Any]:
    """One output's budget record. `bound` names the term that set the pass bound: "tolerance" (k x native error
    at most atol: the tolerance is the larger bound everywhere), "k x native" (k x native error above the tolerance
    at every element), or "both" (elementwise maximum: the tolerance on large elements, the native term on small)."""
    native_bound = k * native_error
    kind = "tolerance" if native_bound <= tol.atol else "k x native" if native_bound >= max_tol_bound else "both"
    entry = {"tolerance": {"atol": tol.atol, "rtol": tol.rtol}, "k": k, "native_error": native_error,
             "native_bound": native_bound, "bound": kind, "worst_ratio": worst, "norm": "max-abs per output"}
    if fallback:
        entry["note"] = "no float64 reference: the native result was the reference, so only the tolerance applies"
    return entry


def native_scale(n64: torch.Tensor, e64: torch.Tensor) -> float:
    """E of `output_compare`'s module doc: the largest |native - ref64| over elements where both are finite (0.0 when none are, or
    when the native result is the reference itself)."""
    if n64 is e64 or not n64.numel():
        return 0.0
    finite = torch.isfinite(n64) & torch.isfinite(e64)
    if not bool(finite.any()):
        return 0.0
    return float((n64 - e64).abs()[finite].max())
