"""The public API is typed for the user's own checker: `py.typed` ships, the lazily loaded `workbench` package still
shows every public name with its type, and a wrong argument is caught before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

GOOD = """
import threading
import workbench as wb

task: wb.Task = wb.get_task("softmax")
opts = wb.EvalOptions(device="cpu", rounds=6, cancel=threading.Event(), on_progress=lambda p: print(p.describe()))
result: wb.Result = wb.evaluate(task, wb.Candidate(source="...", language="triton"), options=opts)
speedup: float | None = result.speedup
store = wb.Store("results.db")
store.add(result)
"""

BAD = """
import workbench as wb

result = wb.evaluate("softmax", "src", options="cpu")
wb.EvalOptions(rounds="five")
name: int = wb.get_task("softmax").name
"""


def _mypy(source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "user_code.py"
    script.write_text(source)
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
                           "--config-file", str(ROOT / "pyproject.toml"), str(script)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_py_typed_ships_with_each_package():
    for package in ("workbench", "roofline", "widgets"):
        assert (ROOT / package / "py.typed").is_file()


def test_the_checker_sees_the_public_api_through_the_lazy_package(tmp_path):
    pytest.importorskip("mypy")
    good = _mypy(GOOD, tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(BAD, tmp_path)
    assert bad.returncode == 1
    errors = [line for line in bad.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 3, bad.stdout
    assert '"options" to "evaluate" has incompatible type "str"' in errors[0]
    assert '"rounds" to "EvalOptions" has incompatible type "str"' in errors[1]
    assert 'expression has type "str", variable has type "int"' in errors[2]
