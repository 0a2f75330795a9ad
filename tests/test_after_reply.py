"""What an evaluation leaves for after its reply (`Context.tidy`, `runner_start.close_runner`): its runner is killed
before the reply and reaped after it, so no reply waits for a runner's exit and no killed runner lingers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import workbench as wb
from workbench.eval.judge.context import Context


def test_tidy_runs_what_was_left_in_order_and_a_failure_does_not_stop_the_rest(capsys):
    ctx = Context(fork_server=None, workdir="/tmp")
    done: list[str] = []

    def fails() -> None:
        raise OSError("gone already")

    ctx.after_reply += [lambda: done.append("reap"), fails, lambda: done.append("memory")]
    ctx.tidy()
    assert done == ["reap", "memory"] and ctx.after_reply == []
    assert "tidying after a reply failed: OSError: gone already" in capsys.readouterr().err
    ctx.tidy()  # nothing left: nothing runs twice
    assert done == ["reap", "memory"]


def _tree(root: int) -> dict[int, str]:
    """Every process below `root`, with its state letter (Z: exited, not yet reaped)."""
    stats: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
                stats[int(name)] = (int(fields[1]), fields[0])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, state) in stats.items():
            if ppid == parent and pid not in found:
                found[pid] = state
                todo.append(pid)
    return found


def test_killed_runners_are_reaped_after_the_reply_and_none_accumulates(one_judge, monkeypatch):
    monkeypatch.setenv("KWB_POOL_IDLE_S", "600")  # the spare stays: only the candidates' runners come and go
    task = wb.get_task("softmax")
    first = wb.evaluate(task, task.solution_candidate(), device="cpu")
    assert first.status == "ok", first.message
    judge = first.metadata["judge_pid"]
    for _ in range(2):
        res = wb.evaluate(task, task.solution_candidate(), device="cpu")
        assert res.status == "ok", res.message
    deadline = time.monotonic() + 20
    tree = _tree(judge)
    while time.monotonic() < deadline and (len(tree) > len(_tree(judge)) or "Z" in tree.values()):
        time.sleep(0.2)
        tree = _tree(judge)
    # The fork server and at most one spare runner (with its namespace's first child): three evaluations' runners
    # are gone, none left as a zombie.
    assert "Z" not in tree.values(), tree
    assert len(tree) <= 3, tree
