"""Timeouts and runner deaths report what happened (issue 19 item 2). Every timeout used to end with "Last runner
output: kwb sandbox setup failed: OSError: [Errno 22] Invalid argument": the runner's first child, passing the
runner's SIGKILL on to itself, tried to install a handler for SIGKILL, which the kernel refuses, and reported that
as a setup failure (exit code 70) while the Result said `sandbox namespaces`. A runner killed from outside (the
out-of-memory killer) read the same way."""

from __future__ import annotations

import faulthandler
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.eval.runner.forkserver import exit_like
from workbench.sandbox import namespaces as sandbox

#: Sleeps in forward, after leaving a mark in its private /tmp (seen from outside through /proc/<pid>/root).
SLEEPER = ("import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        import time\n        open('/tmp/kwb-in-forward', 'w').close()\n        time.sleep(40)\n"
           "        return torch.softmax(x, -1)\n")
needs_sandbox = pytest.mark.skipif(sandbox.probe().kind != "namespaces", reason="no namespaces here")


def _eval(source: str, **kw) -> wb.Result:
    return wb.evaluate(softmax_task(), wb.Candidate(source=source, language="torch"), device="cpu", time_it=False,
                       **kw)


def _no_false_setup_failure(res: wb.Result) -> None:
    text = res.message + res.log
    assert "sandbox setup failed" not in text and "Invalid argument" not in text, text
    assert "exited with code 70" not in text


def test_a_timeout_says_timeout_and_nothing_about_the_sandbox():
    res = _eval(SLEEPER, timeout=3)
    assert res.status == "timeout" and "no result within 3 s (the runner was killed)" in res.message, res.message
    _no_false_setup_failure(res)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _runner_in_forward(root: int) -> int | None:
    """A process started (indirectly) by `root` that is PID 1 of its own PID namespace (a runner) and whose
    candidate has reached forward."""
    for pid in _descendants(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            if len(nspid) > 1 and nspid[-1] == "1" and Path(f"/proc/{pid}/root/tmp/kwb-in-forward").exists():
                return pid
        except OSError:
            continue
    return None


@needs_sandbox
def test_a_runner_killed_from_outside_is_reported_as_killed():
    """What the out-of-memory killer does: SIGKILL to the runner while it works."""
    killed: list[int] = []

    def kill_the_runner() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            runner = _runner_in_forward(os.getpid())
            if runner is not None:
                os.kill(runner, signal.SIGKILL)
                killed.append(runner)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill_the_runner, daemon=True)
    thread.start()
    res = _eval(SLEEPER, timeout=120)
    thread.join(5)
    assert killed, "no runner found to kill"
    assert res.status == "crashed" and "killed by SIGKILL" in res.message, res.message
    assert "out-of-memory killer" in res.message
    _no_false_setup_failure(res)


def _status_of(how: str) -> int:
    """The wait status of a real child that ended `how`."""
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        faulthandler.disable()  # pytest's handler would print this child's stack on SIGSEGV
        os.write(ready_w, b"r")
        if how == "exit 3":
            os._exit(3)
        time.sleep(30)
        os._exit(0)
    os.read(ready_r, 1)  # the child is past the line above: the signal finds it ready
    os.close(ready_r)
    os.close(ready_w)
    if how != "exit 3":
        os.kill(child, getattr(signal, how))
    return os.waitpid(child, 0)[1]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV", "SIGTERM", "exit 3"])
def test_the_first_child_ends_the_way_the_runner_ended(how):
    """`exit_like` in a real process: the judge's wait status then says what happened to the runner."""
    status = _status_of(how)
    first_child = os.fork()
    if first_child == 0:
        exit_like(status)
    _, mirrored = os.waitpid(first_child, 0)
    assert mirrored == status


def test_a_signal_ignored_by_default_is_passed_on_as_an_exit_code():
    first_child = os.fork()
    if first_child == 0:
        exit_like(signal.SIGWINCH)  # the wait status of a process killed by SIGWINCH
    _, mirrored = os.waitpid(first_child, 0)
    assert os.WIFEXITED(mirrored) and os.WEXITSTATUS(mirrored) == 128 + signal.SIGWINCH
