"""The judge's timeline (`judge/trace.py`, KWB_JUDGE_TRACE): off by default, and when on, one file per evaluation
whose events show the stages, the runner's messages and the reference's rounds in the order they happened."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

from engine_tasks import SOFTMAX

import workbench as wb
from workbench.eval.judge import trace
from workbench.tasks.kernelbench import reference_as_candidate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_tracing_is_off_without_the_variable(monkeypatch):
    monkeypatch.delenv("KWB_JUDGE_TRACE", raising=False)
    trace.begin()
    trace.instant("x")
    with trace.span("y"):
        pass
    assert trace.end("label") is None


def test_a_traced_evaluation_writes_its_timeline(one_judge, tmp_path, monkeypatch):
    """A judge started with the variable set writes each evaluation's events; the benchmark's printer folds them."""
    from eval_trace import folded, read

    monkeypatch.setenv("KWB_JUDGE_TRACE", str(tmp_path))
    task = wb.Task.from_source(SOFTMAX, name="traced-softmax")
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert res.status == "ok", res.message
    files = glob.glob(os.path.join(tmp_path, "trace-*.jsonl"))
    assert len(files) == 1
    label, events = read(files[0])
    assert label == "traced-softmax / traced-softmax-reference"
    names = [e["name"] for e in events]
    stages = [n.removeprefix("stage ") for n in names if n.startswith("stage ")]
    assert stages[:3] == ["scan", "load", "calibrate"] and "check" in stages and "time" in stages
    assert names.index("runner <- load") < names.index("runner -> loaded") < names.index("stage check")
    loaded = next(e for e in events if e["name"] == "runner -> loaded")
    assert 0 < loaded["seconds"] < res.stage_seconds["load"]  # the runner's own figure rides along
    assert any(n == "round native" for n in names)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    lines = folded(events)
    assert lines and len(lines) <= len(events)
    assert json.loads(Path(files[0]).read_text().splitlines()[1])["name"] == "stage scan"
