"""Where no sandbox can be made, evaluation still works and every Result, the CLI and `kwb doctor` say so."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from redteam.attacks import evaluate, kernel, softmax_task
from workbench.eval.caller.pool import shutdown_workers

FALLBACK_TIERS = ("landlock+seccomp", "landlock", "seccomp", "none")


@pytest.fixture
def no_sandbox(monkeypatch):
    monkeypatch.setenv("KWB_SANDBOX", "none")
    shutdown_workers()  # the next judge and its fork server see the setting
    yield
    shutdown_workers()


def test_without_a_sandbox_verdicts_still_come_and_say_so(no_sandbox):
    ok = evaluate(kernel())
    # No namespaces: the tier names what still confines the runner (Landlock, the syscall filter) or "none".
    assert ok.status == "ok" and ok.sandbox in FALLBACK_TIERS, ok.message
    assert "KWB_SANDBOX" in ok.protocol.get("sandbox_reason", "")
    assert f"sandbox={ok.sandbox}" in ok.summary()
    wrong = evaluate(kernel(in_forward="y = y * 0.5"))
    assert "mismatch" in wrong.flags and wrong.sandbox == ok.sandbox


def test_the_cli_and_doctor_show_the_missing_sandbox(no_sandbox, tmp_path):
    from workbench.eval.caller.judges import scrubbed_env

    source = tmp_path / "k.py"
    source.write_text(kernel().source)
    env = {**scrubbed_env("cpu"), "KWB_SANDBOX": "none"}
    task_file = tmp_path / "task.py"
    task_file.write_text(softmax_task().source)
    out = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", "--task", str(task_file), str(source),
                          "--device", "cpu", "--no-time"], capture_output=True, text=True, env=env, timeout=600)
    assert re.search(r"sandbox\s+(landlock|seccomp|none)\S*\s+\(not isolated: turned off with KWB_SANDBOX", out.stdout), \
        out.stdout + out.stderr
    doctor = subprocess.run([sys.executable, "-m", "workbench.cli", "doctor"], capture_output=True, text=True,
                            env=env, timeout=300)
    assert "none: NONE" in doctor.stdout
