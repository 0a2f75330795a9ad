"""The verdict has one home: in the judge, only `judge/verdict.py` sets a Result status, and the caller never
changes the status the judge sent."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench as wb
from workbench.result import STATUSES, Timing

JUDGE = Path(__file__).resolve().parents[1] / "workbench" / "eval" / "judge"
#: The NVML telemetry summary has a "status" of its own (whether the sensors answered), not a verdict.
NOT_VERDICTS = {"timing/telemetry.py"}


def _status_assignments(path: Path) -> list[int]:
    """Lines where `path` sets a status: a dict with a "status" key holding a Result status, or `status=`."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status" and not (
                        isinstance(value, ast.Constant) and value.value not in STATUSES):
                    lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "status":
            lines.append(node.value.lineno)
    return lines


def test_only_the_verdict_module_sets_a_status_in_the_judge():
    found = {str(p.relative_to(JUDGE)): _status_assignments(p) for p in JUDGE.rglob("*.py")}
    assert found["verdict.py"], "the verdict module decides every status"
    elsewhere = {name: lines for name, lines in found.items()
                 if lines and name != "verdict.py" and name not in NOT_VERDICTS}
    assert elsewhere == {}, f"a status set outside judge/verdict.py: {elsewhere}"


def test_the_caller_keeps_the_judges_status_whatever_the_roofline_says():
    """A reply the judge called "ok" whose time is far below the physical floor stays "ok" in the Result: the
    physics check is the judge's (judge/verdict.py), the caller's roofline annotation only adds numbers."""
    from workbench.eval.evaluate import _annotate, make_job, resolve_options
    from workbench.eval.results import result_from_reply
    from workbench.eval.wire.judge_messages import Reply

    task = wb.get_task("vector_add")
    cand = task.solution_candidate()
    job = make_job(task, cand, resolve_options(None, "cpu", {}))
    fast = Timing(median_ms=1e-9, min_ms=1e-9, max_ms=1e-9, iqr_ms=0.0, ci95_low_ms=1e-9, ci95_high_ms=1e-9, n=50,
                  clock="cuda-events")
    reply = Reply(status="ok", device_name="NVIDIA H100 80GB HBM3", timing=fast, reference_timing=fast,
                  counted={"flops": 1e6, "bytes": 1e9})
    result = result_from_reply(task, cand, job, reply)
    _annotate(result, task, reply)
    assert (result.status, result.flags) == ("ok", [])
    assert result.metadata["physics_floor_ms"] > 1e3 * fast.median_ms  # impossible by the numbers; not our verdict
