"""A study notebook's parameters: which names its `parameters` cell defines, checks of what a run passes, and
JSON values that plain papermill delivers as strings.

papermill injects any name it is given and only warns about names the notebook does not define, so
`-p task_nme rmsnorm` would run the whole grid on the default task. The runner checks every name against the
notebook's `parameters` cell first and refuses unknown ones, suggesting the closest known name.

`papermill nb.ipynb out.ipynb -p variants '["a", "b"]'` passes the *string* '["a", "b"]' (papermill's CLI
parses numbers and booleans, not lists). A study's first cell after its parameters therefore runs its
list/dict parameters through `json_parameter`, so the same notebook works from `kwb study run`, from plain
papermill and interactively.
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.tasks.assignments import top_level_assignments

#: Parameters every study notebook receives from the runner (its parameters cell defines the defaults).
RUNNER_PARAMETERS = ("store_path", "run_id", "point_id", "device")

_UNSET = object()


class StudyInputError(WorkbenchError):
    """What a study run was given cannot work (unknown parameter, bad grid file, missing notebook).

    `usage` marks it as the caller's mistake: `kwb` exits with status 2 for it."""

    usage = True


def read_notebook(path: str | Path) -> dict[str, Any]:
    """The notebook's JSON, or a StudyInputError that says why the file is not a notebook."""
    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"study notebook {path} does not exist" if not path.exists()
                              else f"study notebook {path} is not a file")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StudyInputError(f"{path} is not a Jupyter notebook (not UTF-8 text); give the .ipynb file") from exc
    except json.JSONDecodeError as exc:
        raise StudyInputError(f"{path} is not a Jupyter notebook (not JSON: {exc.msg} at line {exc.lineno}); "
                              "give the .ipynb file") from exc
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise StudyInputError(f"{path} is not a Jupyter notebook (no cells); give the .ipynb file")
    return data


def notebook_parameters(path: str | Path) -> dict[str, Any]:
    """Name -> default value of every assignment in the cell tagged `parameters`, in order.

    A default that is not a literal (an expression, a call) is reported as None: the name is known, its type
    is not. A notebook without a parameters cell has no parameters.
    """
    for cell in read_notebook(path)["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") == "code" and "parameters" in tags:
            source = cell.get("source", "")
            return _assignments("".join(source) if isinstance(source, list) else source)
    return {}


def _assignments(source: str) -> dict[str, Any]:
    return top_level_assignments(source, lambda node, _so_far: ast.literal_eval(node))


def closest(name: str, known: list[str]) -> str | None:
    """The known name most like `name` (difflib), or None when nothing is close."""
    hits = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return hits[0] if hits else None


def check_parameters(notebook: str | Path, names: list[str] | tuple[str, ...] | set[str],
                     values: dict[str, Any] | None = None, *, source: str = "-p") -> dict[str, Any]:
    """Refuse names the notebook's `parameters` cell does not define, and values whose type cannot match a
    numeric or boolean default. Returns the notebook's parameters (name -> default).

    `source` says where the names came from ("-p", "the grid file x.yaml") so the message points at it.
    """
    defaults = notebook_parameters(notebook)
    known = [k for k in defaults if k not in RUNNER_PARAMETERS or k == "device"]
    for name in names:
        if name in defaults:
            continue
        hint = closest(name, list(defaults))
        lines = [f"{Path(notebook).name} has no parameter {name!r} (given by {source})"
                 + (f"; did you mean {hint!r}?" if hint else "")]
        lines.append(f"its parameters: {', '.join(known) or '(none: the notebook has no `parameters` cell)'}")
        raise StudyInputError("\n".join(lines))
    for name, value in (values or {}).items():
        _check_type(Path(notebook).name, name, value, defaults.get(name, _UNSET), source)
    return defaults


def check_grid(notebook: str | Path, grid: dict[str, Any], source: str = "the grid") -> None:
    """check_parameters for every name and every value of a grid (name -> list of values)."""
    check_parameters(notebook, list(grid), source=source)
    for name, values in grid.items():
        for value in (values if isinstance(values, (list, tuple)) else [values]):
            check_parameters(notebook, [], {name: value}, source=source)


def _check_type(notebook: str, name: str, value: Any, default: Any, source: str) -> None:
    if default is _UNSET or default is None:
        return
    if isinstance(default, (list, tuple, dict)):
        _check_container(notebook, name, json_parameter(name, value), default, source)
        return
    if isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, (int, float)):
        ok, want = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    else:
        return
    if not ok:
        raise StudyInputError(f"{notebook}: parameter {name} ({source}) must be {want} like its default "
                              f"{json.dumps(default)}, not {json.dumps(value, default=str)}")


def _check_container(notebook: str, name: str, value: Any, default: Any, source: str) -> None:
    """A list parameter must arrive as a list (or JSON text of one), a dict one as a dict: `-p block_sizes
    notjson` would otherwise reach the notebook as a string and fail there, far from the typo."""
    want = dict if isinstance(default, dict) else (list, tuple)
    if value is None or isinstance(value, want):
        return
    kind = "a JSON object" if want is dict else "a JSON list"
    example = json.dumps(default, separators=(",", ":"))
    raise StudyInputError(f"{notebook}: parameter {name} ({source}) must be {kind} like its default {example}, "
                          f"not {json.dumps(value, default=str)}; e.g. -p {name} '{example}'")


def json_parameter(name: str, value: Any) -> Any:
    """`value` with a JSON list or object given as text parsed: '["a", "b"]' -> ["a", "b"].

    Other values pass through unchanged (a plain string stays a string). Text that starts like JSON but does
    not parse is an error naming the parameter, since running on with a string would fail much later.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{":
        return value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyInputError(
            f"parameter {name}={value!r} looks like JSON but does not parse ({exc.msg} at column {exc.colno}); "
            "quote strings with double quotes, e.g. -p variants '[\"solution\", \"a.py\"]'") from exc
