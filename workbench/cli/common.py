"""What every `kwb` command shares: exit codes, the usage error, and the checks on what a user typed.

A mistake in what the user typed (a binary file, `--size dim=abc`, a misspelled size name) must end in one to
three lines that say what is wrong and what to type instead, with exit status 2, before any worker starts:
a traceback or a `runtime_error` result stored for a typo would blame the candidate for the user's slip.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import operator
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.tasks.task import top_level_assignments

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(WorkbenchError):
    """Bad command-line input; `kwb` prints the message and exits with status 2."""


def did_you_mean(name: str, known: list[str] | tuple[str, ...] | set[str]) -> str:
    """" (did you mean 'dim'?)" for a close match among `known`, else ""."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of a file the user named, or a UsageError that says why it cannot be used."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist; check the path (relative paths start at {Path.cwd()})")
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; name a file inside it")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from exc
    if b"\0" in data[:8192]:
        raise UsageError(f"{what} {path} is a binary file, not source text; give the .py file that defines it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "save it as UTF-8 source and try again") from exc


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is two lines (what is wrong, where to read more), not the whole synopsis."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n(`{self.prog} --help` lists the options)\n")


def device_arg(value: str) -> str:
    """argparse type for --device: argparse turns the ArgumentTypeError into a usage message and exit 2."""
    if value == "cpu" or value == "cuda" or value.startswith("cuda:"):
        return value
    raise argparse.ArgumentTypeError(f"device must be cpu, cuda or cuda:N, not {value!r}")


def positive(kind: type = int):
    """argparse type for counts and durations: a positive int (or float), refused with a one-line message."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a {'whole ' if kind is int else ''}number, not {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    return parse


def open_store(path: str, create: bool = True):
    """The results store; reading commands refuse to create an empty one by accident."""
    from workbench.store import Store

    check_store_path(path, create)
    return Store(path)


def check_store_path(path: str, create: bool = True) -> None:
    """A --store the user named must be an SQLite file (or, when `create`, not exist yet)."""
    target = Path(path)
    if not create and not target.exists():
        raise UsageError(f"no results store at {path}; create one with `kwb eval ... --store {path}` or `kwb demo`")
    if target.is_dir():
        raise UsageError(f"--store {path} is a directory; give a file name such as {target / 'results.db'}")
    if target.is_file() and target.stat().st_size > 0:
        with target.open("rb") as f:
            if f.read(16) != b"SQLite format 3\0":
                raise UsageError(f"--store {path} is not a results store (not an SQLite file); choose another path")


# ---- sizes ------------------------------------------------------------------------------------------------

def parse_size(text: str | None) -> str | dict[str, Any] | None:
    """"cpu"/"gpu" stay preset names; "batch_size=16,dim=256" becomes a dict with numbers parsed."""
    if text is None or text in ("cpu", "gpu"):
        return text
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad size {part!r}: give a preset (cpu, gpu) or NAME=VALUE pairs separated by commas, "
                             "e.g. batch_size=16,dim=256")
        out[key.strip()] = _parse_value(value.strip())
    return out


def _parse_value(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}


def _constant(node: ast.AST, env: dict[str, Any]) -> Any:
    """Literals, earlier constants and arithmetic on them (`n = 1 << 20`, `dim = 2 * batch`); else ValueError."""
    if isinstance(node, ast.Name) and node.id in env and env[node.id] is not None:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _constant(node.left, env), _constant(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _constant(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_constant(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    return ast.literal_eval(node)


def size_defaults(source: str) -> dict[str, Any]:
    """The reference's module-level constants and their values (None where not plain arithmetic).

    Sizes are module constants that `get_inputs()` reads, so their defaults tell which names exist and what
    type a new value must have: `dim = 256` wants an integer, not "abc".
    """
    return top_level_assignments(source, _constant)


def check_size(task, size: str | dict[str, Any] | None, option: str = "--size") -> None:
    """Reject a size the task cannot use before any evaluation: unknown preset, unknown name, wrong type."""
    if size is None:
        return
    if isinstance(size, str):
        if task.sizes and size not in task.sizes:
            raise UsageError(f"{option} {size}: task {task.name!r} has the size presets {', '.join(task.sizes)}; "
                             "or give NAME=VALUE pairs")
        return
    defaults = size_defaults(task.source)
    known = sorted(k for k in defaults if k.isidentifier() and not k.startswith("_"))
    for key, value in size.items():
        if key == "dtype" and "dtype" in defaults:
            _check_dtype(task, value, option)
            continue
        if key not in defaults:
            raise UsageError(f"{option}: task {task.name!r} has no size {key!r}{did_you_mean(key, known)}; "
                             f"its sizes are {', '.join(k for k in known if k != 'dtype') or '(none)'}")
        _check_type(key, value, defaults[key], option)


def _check_type(key: str, value: Any, default: Any, option: str) -> None:
    if default is None:
        return
    if isinstance(default, bool) or not isinstance(default, (int, float, tuple, list)):
        return
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "a whole number"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
    else:
        ok = isinstance(value, (list, tuple))
        want = "a list such as [16,256]"
    if not ok:
        raise UsageError(f"{option} {key}={json.dumps(value) if not isinstance(value, str) else value}: {key} must be "
                         f"{want} (the task's default is {default!r}), e.g. {key}={_example(default)}")


def _example(default: Any) -> str:
    if isinstance(default, (list, tuple)):
        return json.dumps(list(default)).replace(" ", "")
    return str(default)


def _check_dtype(task, value: Any, option: str) -> None:
    allowed = {"float16", "bfloat16", "float32", "float64", *task.dtypes}
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(f"{option} dtype={value}: use one of {', '.join(sorted(allowed))} "
                         f"(the task's own: {', '.join(task.dtypes)})")
