"""Why a study point failed, in three lines: the exception (`ename: evalue`), the cell and the failing line.

papermill's own message starts with a banner and the top of an ANSI-coloured traceback; cut to a dozen lines
it often loses the exception itself. The executed notebook keeps the error output as data (ename, evalue,
traceback), and the point's child process reports the same fields, so the summary is built from those.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

#: The child process prints this prefix and a JSON object on stderr when a point fails.
MARKER = "KWB-POINT-ERROR "

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ARROW = re.compile(r"^\s*-+>\s*(\d+)\s?(.*)$")
_CELL = re.compile(r"(Cell In\s*\[\d*\],?\s*line \d+|Input In \[\d*\])")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def failing_line(traceback: list[str] | str) -> str:
    """"cell In[3], line 9: raise ValueError(...)": the last frame's arrow line in an IPython traceback."""
    lines = strip_ansi("\n".join(traceback) if isinstance(traceback, list) else traceback).splitlines()
    where, code = "", ""
    for line in lines:
        cell = _CELL.search(line)
        if cell:
            where = cell.group(1)
        arrow = _ARROW.match(line)
        if arrow:
            code = arrow.group(2).strip()
            if not where:
                where = f"line {arrow.group(1)}"
    if not code:
        return ""
    return f"{where}: {code}" if where else code


def summary(ename: str, evalue: str, traceback: list[str] | str | None = None, cell: int | None = None) -> str:
    """The failure as at most three lines: exception, failing line, and the cell number when known."""
    evalue = strip_ansi(evalue or "").strip()
    head = f"{ename}: {evalue}" if evalue else ename
    if len(head) > 600:
        head = head[:600] + " …"
    out = [head]
    line = failing_line(traceback or [])
    if line:
        out.append(f"  at {line}")
    elif cell is not None:
        out.append(f"  in code cell {cell}")
    return "\n".join(out)


def from_notebook(path: str | Path) -> str | None:
    """The first error output of an executed notebook, summarized; None when it has none (or is unreadable)."""
    try:
        nb = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    code_cells = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        code_cells += 1
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return summary(out.get("ename", "Error"), out.get("evalue", ""), out.get("traceback"), code_cells)
    return None


def from_exception(exc: BaseException) -> dict[str, Any]:
    """The fields of a papermill execution error (or any exception) for the child's MARKER line."""
    ename = getattr(exc, "ename", None) or type(exc).__name__
    evalue = getattr(exc, "evalue", None)
    if evalue is None:
        evalue = str(exc)
    return {"ename": ename, "evalue": evalue, "traceback": list(getattr(exc, "traceback", None) or []),
            "cell": getattr(exc, "exec_count", None)}


def from_output(stderr: str, notebook: str | Path | None) -> str:
    """The best summary available: the child's MARKER line, else the executed notebook, else stderr's tail."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                break
            return summary(data.get("ename", "Error"), data.get("evalue", ""), data.get("traceback"),
                           data.get("cell"))
    if notebook is not None:
        found = from_notebook(notebook)
        if found:
            return found
    lines = [ln for ln in strip_ansi(stderr).strip().splitlines() if ln.strip()]
    return "\n".join(lines[-3:]) or "the point's process exited without a message"
