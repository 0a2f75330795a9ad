"""Only a declared PyTorch baseline escapes the task's kernel policy: plain PyTorch whose language was inferred is a
kernel candidate without a kernel (`no-custom-kernel`), so a pasted reply or an RL rollout with no kernel never reads
"ok" on a kernel task. A declared baseline is timed, and every surface says the policy was not applied. Interpreter
times are never set beside a reference time."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.cli.format import format_result
from workbench.result import BASELINE_POLICY, kernel_policy_text
from workbench.store import Store

PLAIN_SOFTMAX = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
"""
BASELINE_TEXT = "PyTorch baseline: kernel policy not applied"


def test_inferred_plain_torch_is_a_kernel_candidate_and_declared_torch_a_baseline():
    inferred, declared = wb.Candidate(PLAIN_SOFTMAX), wb.Candidate(PLAIN_SOFTMAX, language="torch")
    assert inferred.language == declared.language == "torch"
    assert (inferred.baseline, declared.baseline) == (False, True)
    assert inferred.id != declared.id  # different verdicts, different identities
    assert wb.Candidate(PLAIN_SOFTMAX, language="torch", baseline=False).baseline is False
    import dataclasses

    assert dataclasses.replace(inferred, name="copy").baseline is False  # a copy keeps what was declared
    with pytest.raises(wb.WorkbenchError, match="baseline=True declares a PyTorch baseline"):
        wb.Candidate(PLAIN_SOFTMAX, language="triton", baseline=True)


def test_static_scan_rejects_inferred_torch_under_both_policies_and_passes_a_declared_baseline():
    from workbench.eval.checks.static_scan import scan

    for policy in ("strict", "partial"):
        flags = [f.flag for f in scan(PLAIN_SOFTMAX, "torch", policy=policy)]
        assert "no-custom-kernel" in flags, policy
    assert "torch-compute-in-forward" in [f.flag for f in scan(PLAIN_SOFTMAX, "torch", policy="strict")]
    assert scan(PLAIN_SOFTMAX, "torch", policy=BASELINE_POLICY) == []


def test_an_inferred_torch_softmax_is_rejected_and_a_declared_one_is_an_ok_baseline(tmp_path):
    task = wb.get_task("softmax")
    rejected = wb.evaluate(task, PLAIN_SOFTMAX, device="cpu", time_it=False)
    assert rejected.status == "rejected" and "no-custom-kernel" in rejected.flags, rejected.message
    assert "language='torch'" in rejected.message and rejected.kernel_policy == "strict"

    store = Store(tmp_path / "r.db")
    ok = wb.evaluate(task, wb.Candidate(PLAIN_SOFTMAX, language="torch", name="eager"), device="cpu", store=store)
    assert ok.status == "ok", ok.message
    assert ok.kernel_policy == BASELINE_POLICY and kernel_policy_text(ok.kernel_policy) == BASELINE_TEXT
    assert BASELINE_TEXT in format_result(ok)  # the CLI's report
    row = store.frame().iloc[0]
    assert row["kernel_policy"] == BASELINE_POLICY and row["language"] == "torch"


def test_the_card_and_the_report_name_a_baseline():
    pytest.importorskip("ipywidgets")
    from widgets.report_data import table_rows
    from widgets.verdict import stats_rows

    result = wb.Result(task="softmax", candidate_id="c", candidate_name="eager", language="torch", status="ok",
                       kernel_policy=BASELINE_POLICY)
    assert any(BASELINE_TEXT in value for _, value in stats_rows(result))
    headers, rows = table_rows([{"kernel_policy": BASELINE_POLICY, "status": "ok"}], ["status", "kernel_policy"])
    assert BASELINE_TEXT in rows[0]


def test_an_interpreter_time_comes_with_no_reference_time_anywhere(tmp_path):
    task = wb.get_task("vector_add")
    store = Store(tmp_path / "r.db")
    result = wb.evaluate(task, task.solution_candidate(), device="cpu", store=store)
    assert result.status == "ok" and result.timing.clock == "interpreter", result.message
    assert result.reference_timing is None and result.compiled_reference_timing is None
    assert result.speedup is None and result.speedup_verdict is None
    assert "not compared" in format_result(result) and "reference 0." not in format_result(result)
    row = store.frame().iloc[0]
    assert row["ref_median_ms"] is None or row["ref_median_ms"] != row["ref_median_ms"]  # None or NaN
