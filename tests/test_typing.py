"""The public API is typed for the user's own checker: `py.typed` ships, and tests/typecheck/public_api_use.py (a
user's right and wrong uses, through the lazily loaded `workbench` package) is among the files the README's `mypy`
step checks, where a wrong use that stops being an error fails the run. Here: that it stays so."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
USER_CODE = "tests/typecheck/public_api_use.py"


def test_py_typed_ships_with_each_package():
    for package in ("workbench", "roofline", "widgets"):
        assert (ROOT / package / "py.typed").is_file()


def test_the_readme_mypy_step_checks_a_users_right_and_wrong_uses():
    mypy = (ROOT / "pyproject.toml").read_text().split("[tool.mypy]")[1].split("\n[")[0]
    assert f'"{USER_CODE}"' in mypy and "\nwarn_unused_ignores = true" in mypy
    assert "python -m mypy &&" in (ROOT / "README.md").read_text()
    source = (ROOT / USER_CODE).read_text()
    wrong = source[source.index("def wrong_uses"):]
    codes = re.findall(r"# type: ignore\[([a-z-]+)\]", wrong)
    assert codes == ["arg-type", "arg-type", "assignment"], codes
    assert "# type: ignore" not in source[:source.index("def wrong_uses")]
