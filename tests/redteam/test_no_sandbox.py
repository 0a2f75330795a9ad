"""Where no sandbox can be made, evaluation still works and every Result, the CLI and `kwb doctor` say so."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from redteam.attacks import evaluate, kernel, softmax_task
from workbench.dispatch.pool import shutdown_workers

FALLBACK_TIERS = ("landlock+seccomp", "landlock", "seccomp", "none")


@pytest.fixture(scope="module")
def no_sandbox():
    """KWB_SANDBOX=none for this module: one judge started with it (and its fork server) serves both tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KWB_SANDBOX", "none")
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


def test_the_cli_and_doctor_show_the_missing_sandbox(no_sandbox, tmp_path, kwb_here):
    """`kwb eval` in this process, on the module's judge (the entry point's exit statuses are tests/test_cli.py's);
    `kwb doctor` in a new one."""
    from workbench.dispatch.judges import scrubbed_env

    (tmp_path / "k.py").write_text(kernel().source)
    (tmp_path / "task.py").write_text(softmax_task().source)
    out = kwb_here("eval", "--task", "task.py", "k.py", "--device", "cpu", "--no-time", cwd=tmp_path)
    assert re.search(r"sandbox\s+(landlock|seccomp|none)\S*\s+\(not isolated: turned off with KWB_SANDBOX", out.stdout), \
        out.stdout + out.stderr
    # Doctor in a process of its own: this one has already probed (and kept) what sandbox the machine gives.
    env = {**scrubbed_env("cpu"), "KWB_SANDBOX": "none"}
    doctor = subprocess.run([sys.executable, "-m", "workbench.cli", "doctor"], capture_output=True, text=True,
                            env=env, timeout=300)
    assert "none: NONE" in doctor.stdout, doctor.stdout + doctor.stderr
