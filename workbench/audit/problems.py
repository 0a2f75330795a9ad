"""Where an audited kernel's problem is: a KernelBench checkout (its `levelN/ID_Name.py` files) or any folder of
problem files, searched once and indexed by level and id and by name.

A problem is looked up by a path (absolute, or relative to a root), by a name (`19_ReLU`), or by level and id. A
problem that cannot be found, or is ambiguous, is an `AuditInputError`-style message for that one row (the audit
goes on with the others): what was looked for, where, and how to name it instead.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.audit.release import AuditEntry, is_problem_file
from workbench.errors import WorkbenchError
from workbench.tasks.kernelbench import detect_level

if TYPE_CHECKING:
    from workbench.tasks.task import Task

__all__ = ["ProblemIndex", "ProblemNotFound"]


class ProblemNotFound(WorkbenchError):
    """One entry's problem is not among the problem roots; the message says what to give instead."""


def _problem_id(path: Path) -> int | None:
    head = path.stem.split("_", 1)[0]
    return int(head) if head.isdigit() else None


class ProblemIndex:
    """Every KernelBench problem file under `roots`, by (level, id) and by name."""

    def __init__(self, roots: list[str | Path]):
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        self.by_level_id: dict[tuple[int | None, int], list[Path]] = defaultdict(list)
        self.by_name: dict[str, list[Path]] = defaultdict(list)
        for root in self.roots:
            for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
                if any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
                    continue
                try:
                    if not is_problem_file(path.read_text(encoding="utf-8")):
                        continue
                except (OSError, UnicodeDecodeError):
                    continue
                problem_id = _problem_id(path)
                if problem_id is not None:
                    self.by_level_id[(detect_level(path), problem_id)].append(path)
                self.by_name[path.stem].append(path)
        self._tasks: dict[tuple[Path, str, int | None], Task] = {}

    def __len__(self) -> int:
        return sum(len(paths) for paths in self.by_name.values())

    def _where(self) -> str:
        return ", ".join(map(str, self.roots)) or "no problem folder (give --problems KERNELBENCH_CHECKOUT)"

    def resolve(self, entry: AuditEntry) -> Path:
        """The problem file of `entry`; ProblemNotFound says what was looked for and where."""
        if entry.problem:
            return self._by_reference(entry.problem, entry.level)
        if entry.level is not None and entry.problem_id is not None:
            found = self.by_level_id.get((entry.level, entry.problem_id), [])
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise ProblemNotFound(f"level {entry.level} problem {entry.problem_id} is ambiguous: "
                                      f"{', '.join(map(str, found))}; name the file in a manifest's problem column")
            ids = sorted(i for (level, i) in self.by_level_id if level == entry.level)
            have = f"level {entry.level} has ids {ids[0]}..{ids[-1]}" if ids else f"no level{entry.level} folder"
            raise ProblemNotFound(f"no problem level {entry.level} id {entry.problem_id} under {self._where()} "
                                  f"({have}); check the file name or the manifest")
        raise ProblemNotFound("names no problem: put level and id in the file name (level1_19_ReLU.py) or give "
                              "problem, or level and problem_id, in a --manifest")

    def _by_reference(self, problem: str, level: int | None) -> Path:
        given = Path(problem).expanduser()
        places = [given] if given.is_absolute() else [root / given for root in self.roots] + [given]
        for place in places:
            if place.is_file():
                return place.resolve()
        found = self.by_name.get(given.stem, [])
        if level is not None and len(found) > 1:
            found = [p for p in found if detect_level(p) == level] or found
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ProblemNotFound(f"problem {problem!r} is ambiguous: {', '.join(map(str, found))}; give its level "
                                  "or its path relative to the problem folder")
        raise ProblemNotFound(f"problem {problem!r} not found under {self._where()}; give a path to the problem file "
                              "or its name as the checkout spells it (e.g. 19_ReLU)")

    def shipped(self, entry: AuditEntry, folder: Path) -> tuple[Path, str, tuple[str, ...]]:
        """The problem file of an entry whose release ships its reference (written under `folder`), its name (a
        problem folder's name for that level and id, if any), and notes: shipped, and whether that copy differs."""
        assert entry.reference is not None
        digest = hashlib.sha256(entry.reference.encode()).hexdigest()[:10]
        level = f"level{entry.level}" if entry.level is not None else "shipped"
        path = folder / level / f"{entry.problem_id or 0}_{digest}.py"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(entry.reference, encoding="utf-8")
        notes = ["reference as the release ships it"]
        ours = [p for p in self.by_level_id.get((entry.level, entry.problem_id or -1), []) if p.parent != path.parent]
        if len(ours) == 1 and ours[0].read_text(encoding="utf-8") != entry.reference:
            notes.append(f"it differs from {ours[0].name} of the problem folder")
        return path, ours[0].stem if len(ours) == 1 else path.stem, tuple(notes)

    def task(self, path: Path, precision: str, level: int | None = None) -> Task:
        """The problem as a Task under `precision` (its CPU preset fitted, its GPU sizes the file's own)."""
        key = (path, precision, level)
        if key not in self._tasks:
            from workbench.tasks.kernelbench import load_kernelbench

            self._tasks[key] = load_kernelbench(path, fit="cpu", precision=precision,
                                                level=None if detect_level(path) is not None else level)
        return self._tasks[key]
