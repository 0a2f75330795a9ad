"""Audits of published kernels: a release (a folder of KernelBench-format kernels, a JSON release, a manifest) read
as claims, every kernel evaluated honestly, and a table that says which claims survive and why (docs/audit.md).

    from workbench.audit import run_audit
    audit = run_audit("released_kernels/", problems=[".kernelbench/KernelBench"], out="audit")
    audit.frame        # one row per kernel; audit.csv and audit.html are in audit.out_dir
"""

from __future__ import annotations

from workbench.audit.problems import ProblemIndex, ProblemNotFound
from workbench.audit.release import AuditEntry, AuditInputError, ReleaseFields, as_model_new, read_release
from workbench.audit.run import Audit, run_audit
from workbench.audit.table import COLUMNS, summary
from workbench.audit.verdict import ClaimVerdict, judge_claim

__all__ = ["COLUMNS", "Audit", "AuditEntry", "AuditInputError", "ClaimVerdict", "ProblemIndex", "ProblemNotFound",
           "ReleaseFields", "as_model_new", "judge_claim", "read_release", "run_audit", "summary"]
