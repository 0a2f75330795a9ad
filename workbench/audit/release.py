"""A published release read as audit entries: one kernel each, with the problem it solves and the speedup claimed.

Three release shapes are read, and a manifest may name everything a file does not say:

- a folder of `.py` kernels in KernelBench format, the problem named in the path (`level1_19_ReLU.py`,
  `level_1_problem_19_sample_0_kernel.py`, or `level1/19_ReLU.py` as KernelBench lays its problems out);
- a JSON release: a list of records (or a dict holding one under `kernels`, `records`, `results` or `data`), each
  with the kernel's code, its problem and the claim; the field names are `ReleaseFields`, with common defaults;
- a solution whose class is named `Model` (a copy of the problem edited in place): renamed `ModelNew`, said in
  the entry's notes.

A manifest (CSV or JSON) lists `file` (relative to the folder) with any of `problem`, `level`, `problem_id`,
`claimed_speedup`, `source` and `precision`; with a manifest, exactly its rows are audited. Every mistake in it is
reported at once, with its row, before anything runs.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

__all__ = ["AuditEntry", "AuditInputError", "ReleaseFields", "read_release", "as_model_new", "problem_in_name"]

#: Folders never searched for kernels.
_SKIPPED_DIRS = {".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv"}
#: Keys a JSON release may hold its list of records under.
_RECORD_LISTS = ("kernels", "records", "results", "data", "solutions")
#: A JSON release is one document, or JSON Lines (one record per line, as some releases ship `.json` files).
_JSON_SUFFIXES = (".json", ".jsonl")
_NAMED = re.compile(r"(?:^|[_\-.])l(?:evel)?[_-]?(\d+)[_-](?:p(?:roblem)?[_-]?)?(\d+)(?=$|[_\-.])", re.IGNORECASE)
_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_LEADING_ID = re.compile(r"^(\d+)_")
_SPEEDUP = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*[xX×]?\s*$")


class AuditInputError(WorkbenchError):
    """A release or manifest that cannot be read as it is; the message lists every problem and how to fix it."""

    usage = True


@dataclass(frozen=True)
class AuditEntry:
    """One published kernel and its claim."""

    #: Unique within the audit: the file (relative to the release folder), plus `#N` for a record of a JSON file.
    key: str
    code: str
    #: A problem file (a path, or a path relative to a problem root) or a problem's name (`19_ReLU`); or None when
    #: `level` and `problem_id` name it.
    problem: str | None = None
    level: int | None = None
    problem_id: int | None = None
    #: The speedup over the PyTorch reference the publisher reported (None: only "faster" is claimed).
    claimed_speedup: float | None = None
    #: Who published it (a paper, a model, a leaderboard).
    source: str = ""
    #: The precision policy the claim was measured under (None: the audit's default).
    precision: str | None = None
    #: The problem's source as the release ships it beside the kernel (the reference its claim was measured
    #: against), used instead of a problem folder's copy.
    reference: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReleaseFields:
    """Field names of a JSON release's records (and a manifest's columns), each a list of names tried in order."""

    code: tuple[str, ...] = ("code", "kernel", "kernel_code", "kernel_src", "solution", "custom_code")
    problem: tuple[str, ...] = ("problem", "problem_path", "problem_name", "task")
    level: tuple[str, ...] = ("level", "level_id")
    problem_id: tuple[str, ...] = ("problem_id", "task_id")
    claimed_speedup: tuple[str, ...] = ("claimed_speedup", "speedup", "reported_speedup", "score_default")
    source: tuple[str, ...] = ("source", "author", "model")
    precision: tuple[str, ...] = ("precision",)
    name: tuple[str, ...] = ("name", "kernel_name")
    reference: tuple[str, ...] = ("reference", "ref_code", "reference_code")

    @classmethod
    def parse(cls, pairs: list[str] | tuple[str, ...]) -> ReleaseFields:
        """From `FIELD=NAME[,NAME...]` texts (`kwb audit --field code=kernel_src`), the defaults for the rest."""
        known = [f.name for f in fields(cls)]
        changes: dict[str, tuple[str, ...]] = {}
        for pair in pairs:
            key, sep, names = pair.partition("=")
            if not sep or key not in known or not names.strip():
                raise AuditInputError(f"--field {pair!r}: give FIELD=NAME with FIELD one of {', '.join(known)}, "
                                      "e.g. --field code=kernel_src")
            changes[key] = tuple(n.strip() for n in names.split(",") if n.strip())
        return replace(cls(), **changes)

    def pick(self, record: dict[str, Any], what: str) -> Any:
        """The record's value of field `what`: the first of its names the record has."""
        for name in getattr(self, what):
            if name in record and record[name] not in (None, ""):
                return record[name]
        return None


def as_model_new(code: str) -> tuple[str, tuple[str, ...]]:
    """The code with a `Model` class renamed `ModelNew` when it has no `ModelNew` (every whole-word use, so
    `super(Model, self)` follows), and the note that says so."""
    if re.search(r"^class\s+ModelNew\b", code, re.M) or not re.search(r"^class\s+Model\b", code, re.M):
        return code, ()
    return re.sub(r"\bModel\b", "ModelNew", code), ("class Model renamed ModelNew",)


def problem_in_name(path: str | Path) -> tuple[int | None, int | None]:
    """(level, problem id) a kernel's path names: `level1_19_x.py`, `level_1_problem_19_...`, `level1/19_x.py`."""
    path = Path(path)
    match = _NAMED.search(path.stem)
    if match:
        return int(match.group(1)), int(match.group(2))
    level = next((int(m.group(1)) for part in reversed(path.parts[:-1]) if (m := _LEVEL_DIR.match(part))), None)
    leading = _LEADING_ID.match(path.name)
    return level, int(leading.group(1)) if leading else None


def _classes(code: str) -> tuple[set[str], set[str]]:
    """Top-level class and function names of `code` (empty when it does not parse: the judge reports that)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set(), set()
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return classes, functions


def is_problem_file(code: str) -> bool:
    """A KernelBench problem (a `Model` with `get_inputs` and no `ModelNew`), not a kernel."""
    classes, functions = _classes(code)
    return "Model" in classes and "ModelNew" not in classes and "get_inputs" in functions


def _is_kernel_file(code: str) -> bool:
    classes, _ = _classes(code)
    return ("ModelNew" in classes or "Model" in classes) and not is_problem_file(code)


# ---- values ----------------------------------------------------------------------------------------------------

def _speedup(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a speedup")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        match = _SPEEDUP.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a speedup; write a number such as 1.8 or 1.8x")
        number = float(match.group(1))
    if not number > 0 or number == float("inf"):
        raise ValueError(f"{value!r} is not a speedup; a speedup is a positive number such as 1.8")
    return number


def _whole(value: Any, what: str) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = int(str(value).strip().lower().removeprefix("level").removeprefix("l"))
    except ValueError:
        raise ValueError(f"{what} {value!r} is not a whole number") from None
    if number < 1:
        raise ValueError(f"{what} {value!r} must be 1 or more")
    return number


def _precision(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    from workbench.tasks.precision import precisions

    name = str(value).strip().lower()
    if name not in precisions():
        raise ValueError(f"precision {value!r} is unknown; use one of {', '.join(precisions())}")
    return name


def _reference(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not is_problem_file(value):
        raise ValueError("its reference is not a KernelBench problem (a Model class with get_inputs); name the "
                         "right field with --field reference=NAME, or leave it out to use --problems")
    return value


def _entry(key: str, code: str, record: dict[str, Any], names: ReleaseFields, path_hint: str) -> AuditEntry:
    """An entry from a record's fields, the problem taken from `path_hint`'s name where the record says nothing."""
    code, notes = as_model_new(code)
    level = _whole(names.pick(record, "level"), "level")
    problem_id = _whole(names.pick(record, "problem_id"), "problem id")
    problem = names.pick(record, "problem")
    if problem is None and (level is None or problem_id is None):
        named_level, named_id = problem_in_name(path_hint)
        level, problem_id = level or named_level, problem_id or named_id
    return AuditEntry(key=key, code=code, problem=None if problem is None else str(problem), level=level,
                      problem_id=problem_id, claimed_speedup=_speedup(names.pick(record, "claimed_speedup")),
                      source=str(names.pick(record, "source") or ""),
                      precision=_precision(names.pick(record, "precision")),
                      reference=_reference(names.pick(record, "reference")), notes=notes)


# ---- reading -----------------------------------------------------------------------------------------------------

class _Issues:
    """Every mistake found while reading, reported together so one fix-and-rerun fixes them all."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{where}: {what}")

    def raise_any(self, heading: str) -> None:
        if self.lines:
            shown = self.lines[:20] + ([f"... and {len(self.lines) - 20} more"] if len(self.lines) > 20 else [])
            raise AuditInputError(heading + "\n  " + "\n  ".join(shown))


def read_release(folder: str | Path, manifest: str | Path | None = None,
                 names: ReleaseFields | None = None) -> list[AuditEntry]:
    """The kernels of a release (a folder, a git checkout, one `.py` or one JSON file), in path order; with a
    `manifest`, exactly its rows. Raises AuditInputError listing every unreadable file, record or row."""
    folder, names = Path(folder).expanduser(), names or ReleaseFields()
    if not folder.exists():
        raise AuditInputError(f"{folder} does not exist; give the folder (or git checkout) that holds the kernels")
    issues = _Issues()
    if manifest is not None:
        entries = _from_manifest(folder, Path(manifest).expanduser(), names, issues)
        issues.raise_any(f"manifest {manifest} cannot be used as it is (nothing was run):")
    else:
        files = [folder] if folder.is_file() else _release_files(folder)
        entries = []
        for path in files:
            key = path.name if path == folder else path.relative_to(folder).as_posix()
            reader = _from_json if path.suffix in _JSON_SUFFIXES else _from_python
            entries += reader(path, key, names, issues)
        issues.raise_any(f"release {folder} has files that cannot be read (nothing was run):")
    if not entries:
        raise AuditInputError(f"no kernels found in {folder}: no .py file defines ModelNew (or a Model without "
                              "get_inputs), and no JSON file holds records with a code field (name it with "
                              "--field code=NAME); or list the kernels in a --manifest")
    return entries


def _release_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".py", *_JSON_SUFFIXES) and p.is_file()
                  and not any(part in _SKIPPED_DIRS or part.startswith(".") for part in p.relative_to(folder).parts))


def _text(path: Path, where: str, issues: _Issues) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        issues.add(where, "not UTF-8 text; save it as UTF-8 or leave it out of the folder")
    except OSError as exc:
        issues.add(where, f"cannot be read ({exc.strerror})")
    return None


def _from_python(path: Path, key: str, names: ReleaseFields, issues: _Issues) -> list[AuditEntry]:
    code = _text(path, key, issues)
    if code is None or not _is_kernel_file(code):
        return []  # problem files, helpers and scripts of a checkout are not kernels
    try:
        return [_entry(key, code, {}, names, key)]
    except ValueError as exc:  # pragma: no cover - a path gives only whole numbers
        issues.add(key, str(exc))
        return []


def _records(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for name in _RECORD_LISTS:
            if isinstance(data.get(name), list):
                return data[name]
    return None


def _json_or_lines(text: str) -> Any:
    """One JSON document, or JSON Lines (a record per non-blank line); ValueError names the first bad line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        if whole.msg != "Extra data":
            raise ValueError(f"line {whole.lineno}: {whole.msg}") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n}: {exc.msg}") from None
    return records


def _from_json(path: Path, key: str, names: ReleaseFields, issues: _Issues) -> list[AuditEntry]:
    text = _text(path, key, issues)
    if text is None:
        return []
    try:
        records = _records(_json_or_lines(text))
    except ValueError as exc:
        issues.add(key, f"neither JSON nor JSON Lines ({exc})")
        return []
    if not records or not any(isinstance(r, dict) and names.pick(r, "code") is not None for r in records):
        return []  # a JSON file that holds no kernels (a config, a results dump) is not a release
    entries, empty = [], []
    for i, record in enumerate(records):
        where = f"{key} record {i}"
        code = names.pick(record, "code") if isinstance(record, dict) else None
        if code is None and isinstance(record, dict) and any(n in record for n in names.code):
            empty.append(i)  # the release published no kernel for this problem
            continue
        if not isinstance(code, str):
            issues.add(where, f"has no code (looked for {', '.join(names.code)}); name the field with "
                              "--field code=NAME")
            continue
        name = names.pick(record, "name")
        try:
            entries.append(_entry(f"{key}#{i}", code, record, names, str(name or "")))
        except ValueError as exc:
            issues.add(where, str(exc))
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (", ..." if len(empty) > 10 else "")
        warnings.warn(f"{key}: {len(empty)} records have an empty code field (no kernel published for that problem) "
                      f"and are not audited: records {shown}", stacklevel=2)
    return entries


#: Names the manifest's file column may have.
_FILE_COLUMNS = ("file", "path", "kernel_file")


def _manifest_rows(manifest: Path) -> list[dict[str, Any]]:
    if not manifest.is_file():
        raise AuditInputError(f"manifest {manifest} does not exist; give a CSV or JSON file with a `file` column")
    text = manifest.read_text(encoding="utf-8", errors="replace")
    if manifest.suffix.lower() == ".json":
        try:
            rows = _records(json.loads(text))
        except json.JSONDecodeError as exc:
            raise AuditInputError(f"manifest {manifest} is not JSON (line {exc.lineno}: {exc.msg})") from None
        if rows is None or not all(isinstance(r, dict) for r in rows):
            raise AuditInputError(f"manifest {manifest}: a JSON manifest is a list of objects, one per kernel, "
                                  'e.g. [{"file": "k.py", "level": 1, "problem_id": 19, "claimed_speedup": 1.8}]')
        return rows
    return list(csv.DictReader(text.splitlines()))


def _from_manifest(folder: Path, manifest: Path, names: ReleaseFields, issues: _Issues) -> list[AuditEntry]:
    rows = _manifest_rows(manifest)
    columns = sorted({c for row in rows for c in row if c})
    file_column = next((c for c in _FILE_COLUMNS if c in columns), None)
    if file_column is None:
        raise AuditInputError(f"manifest {manifest} has no `file` column (its columns: {', '.join(columns) or 'none'})"
                              f"; each row names a kernel file relative to {folder}")
    base = folder if folder.is_dir() else folder.parent
    entries, seen = [], set()
    for n, row in enumerate(rows, 2 if manifest.suffix.lower() != ".json" else 0):
        where = f"{manifest.name} {'line' if manifest.suffix.lower() != '.json' else 'row'} {n}"
        given = str(row.get(file_column) or "").strip()
        path = next((p for p in (base / given, manifest.parent / given) if given and p.is_file()), None)
        if path is None:
            issues.add(where, f"kernel file {given or '(empty)'!r} not found in {base}" if given else "no file named")
            continue
        if given in seen:
            issues.add(where, f"{given} is listed twice; list each kernel once")
            continue
        seen.add(given)
        code = _text(path, where, issues)
        if code is None:
            continue
        try:
            entries.append(_entry(given, code, row, names, given))
        except ValueError as exc:
            issues.add(where, str(exc))
    return entries
