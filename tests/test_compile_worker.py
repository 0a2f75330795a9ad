"""The judge's compile worker (`judge/compile_worker.py`): a process that compiles the reference first so the judge's
own compile finds Inductor's caches warm. Real processes; the compile itself needs a C++ compiler on the CPU."""

from __future__ import annotations

import shutil
import time

import pytest
from engine_tasks import SOFTMAX

import workbench as wb
from workbench.eval.judge.compile_worker import CompileWorker

PRINTS = SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                         "print('{\"ok\": true, \"note\": \"forged\"}')\n        return torch.softmax(x, dim=-1)")


def _ready(worker: CompileWorker, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if worker.ready():
            return True
        time.sleep(0.05)
    return False


def test_a_job_is_answered_in_one_line_and_a_reference_printing_cannot_forge_it():
    """What the reference prints goes to the worker's stderr: the reply is the worker's own."""
    worker = CompileWorker()
    try:
        assert not worker.busy
        assert _ready(worker), "the worker never said ready"
        task = wb.Task.from_source(PRINTS, name="prints-in-forward")
        reply = worker.compile(task.to_spec(), {"batch_size": 4, "dim": 16}, 0, "cpu", timeout=240)
        assert set(reply) >= {"ok", "note", "seconds"} and reply["note"] != "forged"
        if shutil.which("g++") or shutil.which("c++"):
            assert reply["ok"] is True, reply
        broken = wb.Task.from_source(SOFTMAX.replace("return torch.softmax(x, dim=-1)", "return undefined_name"),
                                     name="broken-forward")
        failed = worker.compile(broken.to_spec(), {"batch_size": 4, "dim": 16}, 0, "cpu", timeout=240)
        assert failed["ok"] is False and "NameError" in failed["note"]
        assert worker.ready()  # a failing job leaves the worker up for the next one
    finally:
        worker.close()
    assert not worker.ready()
    assert worker.compile({}, {}, 0, "cpu")["ok"] is False  # a closed worker answers for itself, at once


def test_a_job_that_outlasts_its_timeout_closes_the_worker():
    worker = CompileWorker()
    try:
        assert _ready(worker)
        slow = wb.Task.from_source(SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                                                   "import time; time.sleep(30)\n        return torch.softmax(x, -1)"),
                                   name="slow-forward")
        reply = worker.compile(slow.to_spec(), {"batch_size": 4, "dim": 16}, 0, "cpu", timeout=1.0)
        assert reply["ok"] is False and "did not answer" in reply["note"]
        assert not worker.ready()
    finally:
        worker.close()


@pytest.mark.parametrize("value", ["0"])
def test_the_worker_can_be_turned_off(monkeypatch, value):
    from types import SimpleNamespace

    from workbench.eval.judge.compile_worker import ahead_for

    monkeypatch.setenv("KWB_COMPILE_WORKER", value)
    assert ahead_for(SimpleNamespace(device="cuda", ctx=SimpleNamespace())) is None
    monkeypatch.delenv("KWB_COMPILE_WORKER")
    assert ahead_for(SimpleNamespace(device="cpu", ctx=SimpleNamespace())) is None  # the judge compiles on GPUs only
