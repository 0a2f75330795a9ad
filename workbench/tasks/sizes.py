"""What a size means: a partial size filled from the device's preset, and every value checked before any work.

A size is a dict of module-constant overrides (`{"batch_size": 64, "dim": 256}`, optionally `"dtype"`). Given in
part (`--size dim=64`), the other names keep the *device's preset*, never the reference file's own constants:
those are GPU-sized, and a softmax of 8192 rows on the Triton interpreter takes minutes where the CPU preset
takes a second.

Every value is checked against the reference's own constants before an evaluation starts, so a typo is the
caller's mistake with a one-line message (`SizeError`), not a `runtime_error` blaming the task's `get_inputs`:
the name must exist, the type must match the default (`dim = 256` wants a whole number), and a dimension must be
at least 1 (`batch_size=0` would "pass" on empty tensors). Axis-like constants (`reduce_dim = 1`) may be 0 or
negative, padding-like ones 0.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import operator
import re
from typing import TYPE_CHECKING, Any

from workbench.errors import TaskError
from workbench.tasks.assignments import top_level_assignments

if TYPE_CHECKING:
    from workbench.tasks.task import Task

#: dtype names any task with a module-level `dtype` accepts (besides its own `dtypes`).
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: Integer constants that index an axis: 0 and negative values (counted from the end) are meaningful.
_AXIS_NAME = re.compile(r"axis|reduce|scan|^dim$|_dim$", re.IGNORECASE)
#: Integer constants where 0 is meaningful but a negative value is not.
_NON_NEGATIVE_NAME = re.compile(r"pad|offset|seed|^p$", re.IGNORECASE)


class SizeError(TaskError):
    """A size the task cannot use: unknown name, wrong type, a dimension below 1, an unknown dtype.

    `subject` is what was given ("dim=abc", or "" for a message about the task), `detail` what is wrong and
    what to write instead; `message(option)` puts the option the user typed in front ("--size dim=abc: ...")."""

    usage = True

    def __init__(self, task: str, subject: str, detail: str):
        self.subject, self.detail = subject, detail
        super().__init__(self.message("size"), task)

    def message(self, option: str) -> str:
        return f"{option} {self.subject}: {self.detail}" if self.subject else f"{option}: {self.detail}"


# ---- the reference's constants ---------------------------------------------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}


def constant_value(node: ast.AST, env: dict[str, Any]) -> Any:
    """Literals, earlier constants and arithmetic on them (`n = 1 << 20`, `dim = 2 * batch`); else ValueError."""
    if isinstance(node, ast.Name) and node.id in env and env[node.id] is not None:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = constant_value(node.left, env), constant_value(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = constant_value(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [constant_value(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    return ast.literal_eval(node)


@functools.lru_cache(maxsize=256)
def _defaults(source: str) -> tuple[tuple[str, Any], ...]:
    return tuple(top_level_assignments(source, constant_value).items())


def size_defaults(source: str) -> dict[str, Any]:
    """The reference's module-level constants and their values (None where not plain arithmetic).

    Sizes are module constants that `get_inputs()` reads, so their defaults tell which names exist and what
    type a new value must have: `dim = 256` wants an integer, not "abc"."""
    return dict(_defaults(source))


def size_names(task: Task) -> list[str]:
    """The names a size may set, dtype excluded (the reference's public module constants)."""
    return sorted(k for k in size_defaults(task.source) if k.isidentifier() and not k.startswith("_") and k != "dtype")


def did_you_mean(name: str, known: list[str] | tuple[str, ...] | set[str]) -> str:
    """" (did you mean 'dim'?)" for a close match among `known`, else ""."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---- checks ---------------------------------------------------------------------------------------------

def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str).replace(" ", "")


def _example(default: Any) -> str:
    return json.dumps(list(default)).replace(" ", "") if isinstance(default, (list, tuple)) else str(default)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _least(name: str, default: int) -> int | None:
    """The smallest value an integer constant may take: 1 for a dimension, 0 for padding-like names, None
    (no bound) for axes and for constants whose own default is not positive."""
    if default <= 0 or (_AXIS_NAME.search(name) and default <= 4):
        return None
    return 0 if _NON_NEGATIVE_NAME.search(name) else 1


def _check_value(task: Task, key: str, value: Any, default: Any) -> None:
    if default is None or isinstance(default, bool) or not isinstance(default, (int, float, tuple, list)):
        return
    subject = f"{key}={_shown(value)}"
    if isinstance(default, int):
        ok, want = _whole(value), "a whole number"
    elif isinstance(default, float):
        ok, want = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    else:
        ok, want = isinstance(value, (list, tuple)), "a list such as [16,256]"
    if not ok:
        raise SizeError(task.name, subject, f"{key} must be {want} (the task's default is {default!r}), "
                                            f"e.g. {key}={_example(default)}")
    if isinstance(default, int):
        least = _least(key, default)
        if least is not None and value < least:
            what = "is a dimension and must be at least 1" if least == 1 else "must be 0 or more"
            raise SizeError(task.name, subject, f"{key} {what} (the task's default is {default}), "
                                                f"e.g. {key}={default}")
    elif isinstance(default, (list, tuple)) and default and all(_whole(d) and d >= 1 for d in default):
        if not all(_whole(v) and v >= 1 for v in value):
            raise SizeError(task.name, subject, f"every entry of {key} is a dimension: whole numbers of at least 1 "
                                                f"(the task's default is {_example(default)})")


def _check_dtype(task: Task, value: Any, defines_dtype: bool) -> None:
    name = str(value).removeprefix("torch.")
    if not defines_dtype:
        raise SizeError(task.name, f"dtype={_shown(value)}", f"task {task.name!r} cannot change its dtype: its "
                                                              "reference defines no module-level `dtype`")
    allowed = sorted({*FLOAT_DTYPES, *task.dtypes})
    if name not in allowed:
        raise SizeError(task.name, f"dtype={_shown(value)}", f"use one of {', '.join(allowed)} "
                                                              f"(the task's own: {', '.join(task.dtypes)})")


def validate_size(task: Task, size: dict[str, Any]) -> None:
    """Raise SizeError for the first thing in `size` the task cannot use (see the module docstring)."""
    if not isinstance(size, dict):
        raise SizeError(task.name, "", f"a size is a preset name or a dict of sizes, not {type(size).__name__}")
    defaults = size_defaults(task.source)
    known = size_names(task)
    for key, value in size.items():
        if key == "dtype":
            _check_dtype(task, value, "dtype" in defaults)
            continue
        if not isinstance(key, str) or key not in defaults or key not in known:
            raise SizeError(task.name, "", f"task {task.name!r} has no size {key!r}{did_you_mean(str(key), known)}; "
                                           f"its sizes are {', '.join(known) or '(none)'}")
        _check_value(task, key, value, defaults[key])


def device_kind(device: str | None) -> str:
    return "gpu" if str(device or "cpu").startswith("cuda") else "cpu"


def complete_size(task: Task, given: dict[str, Any], device: str | None = "cpu") -> dict[str, Any]:
    """`given` checked, then laid over the device's preset: what an evaluation of `given` actually runs."""
    validate_size(task, given)
    base = task.sizes.get(device_kind(device), {}) if task.sizes else {}
    return {**base, **given}


def split_pairs(text: str) -> list[str]:
    """"a=1,shape=[16,256],b=2" -> ["a=1", "shape=[16,256]", "b=2"]: commas inside brackets stay in their value."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth <= 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def size_label(size: dict[str, Any] | None, dtype: str | None = None) -> str:
    """"batch_size=64, dim=256, float32": every name of the size that runs, then its dtype."""
    items = [f"{k}={v}" for k, v in (size or {}).items() if k != "dtype"]
    dtype = (size or {}).get("dtype") or dtype
    return ", ".join(items + ([str(dtype).removeprefix("torch.")] if dtype else []))
