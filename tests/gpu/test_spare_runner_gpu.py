"""The spare runner on a GPU, where it is on by default (`judge/runners/spare.py`): a Triton candidate's second
evaluation runs in the spare with its source's compiled kernels lent to it, the kernels a spare compiles reach its
source's cache, and a new source is lent nothing."""

from __future__ import annotations

import os
import secrets

import pytest

import workbench as wb
from workbench.eval.judge.runners import build_cache

pytestmark = pytest.mark.gpu


def _fresh(task: wb.Task) -> wb.Candidate:
    """The task's Triton solution as a source no runner has compiled (a nonce in a comment)."""
    source = f"# spare runner test {secrets.token_hex(8)}\n" + task.solution_candidate().source
    return wb.Candidate(source=source, language="triton")


def test_a_sources_second_evaluation_runs_in_the_spare_with_its_kernels_lent(one_judge, monkeypatch):
    monkeypatch.delenv("KWB_SPARE_RUNNER", raising=False)
    task = wb.get_task("softmax")
    cand = _fresh(task)
    first = wb.evaluate(task, cand, device="cuda", size="cpu")
    assert first.status == "ok", first.message
    cache = build_cache.triton_dir(cand.source, "cuda")
    assert cache is not None
    compiled = sorted(n for n in os.listdir(cache) if not n.startswith((".", "tmp.")))
    assert compiled, "the kernels compiled by the first runner did not reach the source's cache"
    second = wb.evaluate(task, cand, device="cuda", size="cpu")
    assert second.status == "ok", second.message
    assert second.protocol["runner"] == "spare"
    assert second.protocol["triton_entries_lent"] == len(compiled)
    other = wb.evaluate(task, _fresh(task), device="cuda", size="cpu")
    assert other.status == "ok", other.message
    assert other.protocol["runner"] == "spare" and other.protocol["triton_entries_lent"] == 0
