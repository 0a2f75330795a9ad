"""On a GPU the judge makes the check's next reference rounds while the runner runs a correctness call
(`check_rounds.ahead_of_calls`), on a real device: the rounds are the same ones, the verdict unchanged."""

from __future__ import annotations

import uuid

import pytest
from engine_tasks import SOFTMAX

import workbench as wb

pytestmark = pytest.mark.gpu

#: A reference whose every forward takes 50 ms on the host: its rounds outlast the candidate's import, so some are
#: left for the check.
SLOW_REFERENCE = SOFTMAX.replace("class Model(", "import time\n\n\nclass Model(").replace(
    "        return torch.softmax(x, dim=-1)", "        time.sleep(0.05)\n        return torch.softmax(x, dim=-1)")
#: The same as a candidate whose every call takes half a second (a first call loading its library kernels): the
#: judge has time for the rounds left while it runs.
SLOW_CALLS = SLOW_REFERENCE.replace("class Model(", "class ModelNew(").replace("time.sleep(0.05)", "time.sleep(0.5)")


def test_the_rounds_left_are_made_while_a_slow_call_runs_and_the_verdict_stands():
    task = wb.Task.from_source(SLOW_REFERENCE, name=f"softmax_{uuid.uuid4().hex[:8]}")  # rounds no test made
    res = wb.evaluate(task, wb.Candidate(SLOW_CALLS, language="torch"), device="cuda", time_it=False)
    assert res.status == "ok", res.message
    rounds = len(res.details["rounds"])
    ahead = res.protocol.get("reference_rounds_ahead", 0)
    during = res.protocol.get("reference_rounds_during_calls", 0)
    # Every round but, at most, the first (needed before the first call) made ahead of its call.
    assert during >= 1 and ahead + during >= rounds - 1, res.protocol

    again = wb.evaluate(task, wb.Candidate(SLOW_CALLS, language="torch"), device="cuda", time_it=False)
    assert again.status == "ok" and again.protocol["reference_cache"] == "hit"
    assert "reference_rounds_during_calls" not in again.protocol  # nothing left to make
    assert again.max_abs_err == res.max_abs_err  # the same rounds
