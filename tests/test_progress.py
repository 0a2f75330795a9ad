"""Live progress of one evaluation and its cancel, end to end through a real judge and runner."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.eval.caller import judges
from workbench.eval.caller.progress import ProgressRelay
from workbench.eval.wire.judge_messages import Job, Progress

FAULTS = Path(__file__).parent / "faults"
TASK = softmax_task()
HONEST = (FAULTS / "honest_softmax.py").read_text()
HANG = (FAULTS / "infinite_loop.py").read_text()


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def test_progress_reports_every_stage_in_order_on_the_evaluating_thread():
    seen: list[Progress] = []
    threads = set()

    def record(p: Progress) -> None:
        seen.append(p)
        threads.add(threading.get_ident())

    result = wb.evaluate(TASK, wb.Candidate(source=HONEST, language="triton"), device="cpu", on_progress=record)
    assert result.status == "ok", result.message
    stages = [p.stage for p in seen]
    firsts = list(dict.fromkeys(s for s in stages if s != "start"))
    assert firsts[:2] == ["scan", "load"] and firsts.index("check") < firsts.index("count") < firsts.index("time")
    assert "calibrate" in firsts
    # After the nested calibration the judge says it is loading again, before it checks.
    assert stages[stages.index("calibrate") + 1] == "load"
    assert all(isinstance(p.elapsed, float) and p.elapsed >= 0 for p in seen)
    assert threads == {threading.get_ident()}
    assert all(p.describe().startswith(p.stage) for p in seen)


def test_no_progress_is_sent_unless_asked():
    job = Job(task=TASK.to_spec(), candidate=wb.Candidate(source=HONEST).to_spec(), device="cpu",
              size=TASK.size(None, "cpu"), check_sizes=tuple(TASK.check_sizes("cpu")), timeout=60.0,
              compile_timeout=60.0, time_it=False)
    delivered: list[Progress] = []
    relay = ProgressRelay(delivered.append)
    relay.deliver = delivered.append  # what the judge sends, not the once-a-second repeats
    judge = judges.get_judge("cpu")
    with judges._LOCK:
        reply = judge.request(job, 120, relay)
    assert reply.status == "ok" and delivered == []


def test_cancel_ends_a_hung_evaluation_quickly_with_a_cancelled_result_and_the_next_one_runs():
    wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False)  # a warm judge
    judge = judges._POOL["cpu"]
    cancel = threading.Event()

    def on_progress(p: Progress) -> None:
        if p.stage == "check":  # the candidate's forward never returns from here on
            threading.Timer(1.0, cancel.set).start()

    started = time.monotonic()
    result = wb.evaluate(TASK, wb.Candidate(source=HANG, name="hang"), device="cpu", timeout=300,
                         on_progress=on_progress, cancel=cancel)
    took = time.monotonic() - started
    assert result.status == "cancelled" and "cancelled after" in result.message and took < 30
    assert result.status in wb.STATUSES and not result.ok
    assert result.candidate_name == "hang" and result.task == TASK.name and result.timing is None
    assert _gone(judge.pid), "the cancelled judge is still running"
    after = wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False)
    assert after.status == "ok" and after.metadata["judge_pid"] != judge.pid


def test_a_set_cancel_returns_at_once_and_stores_nothing(tmp_path):
    cancel = threading.Event()
    cancel.set()
    store = wb.Store(str(tmp_path / "r.db"))
    opts = wb.EvalOptions(device="cpu", cancel=cancel)
    results = wb.evaluate_many(TASK, [wb.Candidate(source=HONEST), wb.Candidate(source=HANG)], options=opts,
                               store=store, progress=False)
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert len(store.frame()) == 0


def test_an_exception_from_on_progress_stops_the_evaluation_and_the_judge_is_replaced():
    def boom(p: Progress) -> None:
        if p.stage == "check":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wb.evaluate(TASK, wb.Candidate(source=HANG), device="cpu", timeout=300, on_progress=boom)
    assert wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False).status == "ok"


def test_options_refuse_a_progress_callback_or_cancel_token_of_the_wrong_kind():
    with pytest.raises(wb.WorkbenchError, match="on_progress must be a function"):
        wb.EvalOptions(on_progress="print")
    with pytest.raises(wb.WorkbenchError, match="cancel must be a threading.Event"):
        wb.EvalOptions(cancel=True)
    with pytest.raises(wb.WorkbenchError, match="options must be an EvalOptions"):
        wb.evaluate(TASK, HONEST, options={"device": "cpu"})
