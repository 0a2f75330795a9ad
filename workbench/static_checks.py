"""Static (AST) anti-cheating checks on candidate source (issue 3). Stub contract: filled in by issue 3."""

from __future__ import annotations

from workbench.findings import Finding


def scan(source: str, language: str, entry: str = "ModelNew") -> list[Finding]:
    """Return findings for `source`; reject-severity ones stop the evaluation before anything runs."""
    return []
