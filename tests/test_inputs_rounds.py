"""The distributions the correctness rounds use (docs/verdicts.md section 9), through the public API and the
protocol: which distributions a task's rounds see, the scale rounds at the edges of the number range (a softmax
without the max subtraction is incorrect, the built-in solution is not), and the screen that skips a distribution
on which the reference itself is not finite."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

import workbench as wb
from workbench.eval.judge.correctness.check import run_correctness
from workbench.tasks.distributions import DISTRIBUTIONS

CHEATS = Path(__file__).parent / "cheats"

SOURCE = '''
import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [{draw}]


def get_init_inputs():
    return []
'''


class Same(nn.Module):
    """The reference's computation, as a candidate class run in this process."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _check(body: str, draw: str, fn, **kw):
    task = wb.Task.from_source(SOURCE.format(body=body, draw=draw), name="rounds_test")
    return run_correctness(task.load(), lambda: Same(fn), device="cpu", sizes=[task.size("cpu")], seed=3,
                           tolerance=task.tolerance, **kw)


def test_rounds_see_every_distribution_that_changes_the_inputs():
    report = _check("x * 2", "torch.rand(n)", lambda x: x * 2)
    assert [r["dist"] for r in report.rounds] == [d for d in DISTRIBUTIONS if d != "uniform"]
    report = _check("x * 2", "torch.randn(n) * 2 + 1", lambda x: x * 2)  # normal draws: "normal" repeats them
    assert [r["dist"] for r in report.rounds] == [d for d in DISTRIBUTIONS if d != "normal"]
    assert report.passed and not any(n.startswith("skipped") for n in report.notes)


def test_inputs_that_are_not_random_get_five_rounds_of_their_own_and_a_note():
    report = _check("x * 2", "torch.arange(n, dtype=torch.float32)", lambda x: x * 2)
    assert [r["dist"] for r in report.rounds] == ["default"] * 5
    assert any("draws no random floating values" in n for n in report.notes)


def test_a_scale_round_on_which_the_reference_overflows_is_skipped_with_a_note():
    report = _check("torch.exp(x)", "torch.randn(n)", torch.exp)  # exp(1e3 x) is inf in fp32
    assert "large" not in [r["dist"] for r in report.rounds] and report.passed
    assert "skipped large inputs: the reference is not finite on them" in report.notes


def test_naive_softmax_is_incorrect_in_the_large_round_and_the_builtin_solution_is_ok():
    task = wb.get_task("softmax")
    honest = wb.evaluate(task, task.solution_candidate(), device="cpu", time_it=False)
    assert honest.status == "ok", honest.message
    large = [r for r in honest.details["rounds"] if r["dist"] == "large"]
    assert large and large[0]["ok"]
    naive = wb.Candidate.from_file(CHEATS / "naive_softmax.py")
    result = wb.evaluate(task, naive, device="cpu", time_it=False)
    assert result.status == "incorrect" and "non-finite" in result.flags, result.message
    failing = [r["dist"] for r in result.details["rounds"] if not r["ok"]]
    assert failing == ["large"], result.details["rounds"]
