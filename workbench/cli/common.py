"""What every `kwb` command shares: exit codes, the usage error, and the checks on what a user typed.

A mistake in what the user typed (a binary file, `--size dim=abc`, a misspelled size name) must end in one to
three lines that say what is wrong and what to type instead, with exit status 2, before any worker starts:
a traceback or a `runtime_error` result stored for a typo would blame the candidate for the user's slip.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.tasks.sizes import SizeError, did_you_mean, size_defaults, split_pairs, validate_size

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERNAL", "UsageError", "did_you_mean", "size_defaults",
           "check_size", "parse_size", "read_text_file", "open_store", "check_store_path", "positive", "device_arg"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(WorkbenchError):
    """Bad command-line input; `kwb` prints the message and exits with status 2."""


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


def datasheet_gpu(name: str) -> str:
    """argparse type for --gpu: a GPU of the datasheet table (the error lists them)."""
    from roofline.projection import resolve_gpu
    from workbench.errors import UnknownNameError

    try:
        return resolve_gpu(name).name
    except (UnknownNameError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    for part in split_pairs(text):
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


def check_size(task, size: str | dict[str, Any] | None, option: str = "--size") -> None:
    """Reject a size the task cannot use before any evaluation: an unknown preset or name, a wrong type, a
    dimension below 1 (workbench.tasks.sizes), as a usage error that names the option the user typed."""
    if size is None:
        return
    if isinstance(size, str):
        if task.sizes and size not in task.sizes:
            raise UsageError(f"{option} {size}: task {task.name!r} has the size presets {', '.join(task.sizes)}; "
                             "or give NAME=VALUE pairs")
        return
    try:
        validate_size(task, size)
    except SizeError as exc:
        raise UsageError(exc.message(option)) from None
