"""Live progress of one evaluation and its cancel, end to end through a real judge and runner."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.dispatch import pool as judges
from workbench.dispatch.progress import ProgressRelay
from workbench.eval.wire.judge_messages import CandidateSpec, Job, Progress

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
    assert result.timing is not None, result.message  # it got as far as timing (the verdict is not the point here)
    stages = [p.stage for p in seen]
    firsts = list(dict.fromkeys(s for s in stages if s != "startup"))
    assert firsts[:2] == ["scan", "load"] and firsts.index("check") < firsts.index("count") < firsts.index("time")
    assert "calibrate" in firsts
    # After the nested calibration the judge says it is loading again, before it checks (the relay repeats the
    # latest stage once a second while the judge is silent: a calibration over a second is seen twice in a row).
    changes = [s for k, s in enumerate(stages) if k == 0 or s != stages[k - 1]]
    assert changes[changes.index("calibrate") + 1] == "load"
    assert all(isinstance(p.elapsed, float) and p.elapsed >= 0 for p in seen)
    assert threads == {threading.get_ident()}
    assert all(p.describe().startswith(p.stage) for p in seen)


def test_no_progress_is_sent_unless_asked():
    job = Job(task=TASK.to_spec(), candidate=CandidateSpec(**wb.Candidate(source=HONEST).to_spec()), device="cpu",
              size=TASK.size(None, "cpu"), check_sizes=tuple(TASK.check_sizes("cpu")), timeout=60.0,
              compile_timeout=60.0, time_it=False)
    delivered: list[Progress] = []
    relay = ProgressRelay(delivered.append)
    relay.deliver = delivered.append  # what the judge sends, not the once-a-second repeats
    judge = judges.get_judge("cpu")
    reply = judge.request(job, 120, relay)
    assert reply.status == "ok" and delivered == []


def test_cancel_ends_a_hung_evaluation_quickly_with_a_cancelled_result_and_the_next_one_runs():
    wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False)  # a warm judge
    judge = judges.judges("cpu")[0]
    cancel = threading.Event()

    def on_progress(p: Progress) -> None:
        if p.stage == "check":  # the candidate's forward never returns from here on
            threading.Timer(1.0, cancel.set).start()

    started = time.monotonic()
    result = wb.evaluate(TASK, wb.Candidate(source=HANG, name="hang", language="torch"), device="cpu", timeout=300,
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
    results = wb.evaluate_many(TASK, [wb.Candidate(source=HONEST), wb.Candidate(source=HANG, language="torch")], options=opts,
                               store=store, progress=False)
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert len(store.frame()) == 0


def test_an_exception_from_on_progress_stops_the_evaluation_and_the_judge_is_replaced():
    def boom(p: Progress) -> None:
        if p.stage == "check":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wb.evaluate(TASK, wb.Candidate(source=HANG, language="torch"), device="cpu", timeout=300, on_progress=boom)
    assert wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False).status == "ok"


def test_options_refuse_a_progress_callback_or_cancel_token_of_the_wrong_kind():
    with pytest.raises(wb.WorkbenchError, match="on_progress must be a function"):
        wb.EvalOptions(on_progress="print")
    with pytest.raises(wb.WorkbenchError, match="cancel must be a threading.Event"):
        wb.EvalOptions(cancel=True)
    with pytest.raises(wb.WorkbenchError, match="options must be an EvalOptions"):
        wb.evaluate(TASK, HONEST, options={"device": "cpu"})


TORCH_SOFTMAX = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                 "        return torch.softmax(x, dim=-1)\n")


def _kwb_eval_on_a_terminal(tmp_path: Path) -> tuple[int, str]:
    """`kwb eval` on a torch softmax in a subprocess whose stderr is a pseudo-terminal; (exit code, stderr)."""
    import os
    import pty
    import subprocess
    import sys

    (tmp_path / "sol.py").write_text(TORCH_SOFTMAX)
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "workbench.cli.main", "eval", "--task", "softmax", "sol.py", "--device", "cpu",
           "--language", "torch", "--size", "batch_size=8,dim=64", "--no-time"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower side closed: the command ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def test_kwb_eval_prints_each_stage_with_v_and_a_live_line_on_a_terminal(tmp_path, kwb_here):
    # -v off a terminal in this process (the pooled judge); the live line needs a terminal: a subprocess on a pty.
    (tmp_path / "sol.py").write_text(TORCH_SOFTMAX)
    done = kwb_here("eval", "--task", "softmax", "sol.py", "--device", "cpu", "--language", "torch", "--size",
                    "batch_size=8,dim=64", "--no-time", "-v", cwd=tmp_path)
    code, err = done.returncode, done.stderr
    assert code == 0, err
    stages = [line.split(" · ")[0].strip() for line in err.splitlines() if line.startswith("  ")]
    assert [s for s in stages if s != "startup"][:2] == ["scan", "load"] and "check" in stages, err
    code, err = _kwb_eval_on_a_terminal(tmp_path)
    assert code == 0, err
    refreshed = err.split("\r")
    # The line is rewritten in place (every half second) with the judge's stage and the seconds so far.
    judged = [p for p in refreshed if re.search(r" \.\.\. (scan|load|calibrate|check|count|time|cover) · [\d.]+ s", p)]
    assert judged, err
    assert re.search(r"\.\.\. done in [\d.]+ s\s*$", err), err


def test_the_editor_shows_the_stage_beside_the_elapsed_time_and_cancel_stops_its_evaluation():
    pytest.importorskip("ipywidgets")
    from widgets.editor import KernelEditor

    hang = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        while True:\n"
            "            pass\n")
    ed = KernelEditor("vector_add", hang, device="cpu", timeout=300, language="torch")
    ed.run()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "check" not in ed._progress.value:
        time.sleep(0.1)
    assert "s · check" in ed._progress.value, ed._progress.value  # "⏳ 3.2 s · check"
    worker = ed.job._thread
    ed.cancel()
    worker.join(10)
    assert ed.status == "cancelled" and not worker.is_alive()
