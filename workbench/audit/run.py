"""`run_audit`: re-score a release of published kernels. Each kernel is evaluated under the precision its claim was
measured under, and again under IEEE fp32 when that differs, overlapped over every GPU's judges
(`evaluate_pairs`); the table, a CSV and an HTML report go to the output folder.

The output folder's `audit.db` is the audit's journal: a results store in which each evaluation is added, under
a point id made of the kernel, its code, the problem, the precision and the device, once it has finished. A rerun
with `resume=True` evaluates only what is not there, so a killed audit loses nothing it had finished, and an
edited kernel (or another device) is evaluated afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.audit.problems import ProblemIndex
from workbench.audit.release import AuditEntry, AuditInputError, ReleaseFields, read_release
from workbench.audit.table import audit_frame, audit_row, summary
from workbench.candidate import Candidate
from workbench.errors import WorkbenchError
from workbench.eval.options import EvalOptions
from workbench.result import Result

if TYPE_CHECKING:
    import pandas as pd

    from workbench.store import Store
    from workbench.tasks.task import Task

__all__ = ["Audit", "run_audit", "RUN_ID", "STORE_NAME"]

#: The run id of every evaluation in an audit's store, and the store's file name in the output folder.
RUN_ID = "audit"
STORE_NAME = "audit.db"


@dataclass
class Audit:
    """What `run_audit` produced: the table and where it was written."""

    frame: pd.DataFrame
    out_dir: Path
    csv: Path
    html: Path | None
    #: Evaluations run by this call, and those taken from the journal of an earlier one.
    evaluated: int = 0
    reused: int = 0
    #: Every evaluation behind the table, in its order (a claim under a relaxed precision has two).
    results: list[Result] = field(default_factory=list)

    def summary(self) -> str:
        return summary(self.frame)


@dataclass
class _Row:
    """One entry's plan: its problem, its claim's precision, and the evaluations it needs (precision -> point)."""

    entry: AuditEntry
    problem: str
    precision: str
    points: dict[str, tuple[Task, Candidate, str]] = field(default_factory=dict)
    error: str = ""


def _point_id(entry: AuditEntry, task: Task, candidate: Candidate, precision: str, device: str) -> str:
    size = json.dumps(task.size(None, device), sort_keys=True, default=str)
    blob = "\0".join([entry.key, candidate.id, task.source_hash, precision, device, size])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _plan(entries: list[AuditEntry], index: ProblemIndex, default_precision: str, device: str,
          shipped_dir: Path) -> list[_Row]:
    """Each entry's problem resolved and its evaluations named; a problem that cannot be used is the row's error."""
    rows = []
    for entry in entries:
        precision = entry.precision or default_precision
        named = entry.problem or (f"level {entry.level} problem {entry.problem_id}" if entry.problem_id else "?")
        row = _Row(entry, named, precision)
        rows.append(row)
        try:
            if entry.reference is not None:
                path, row.problem, notes = index.shipped(entry, shipped_dir)
                row.entry = entry = replace(entry, notes=entry.notes + notes)
            else:
                path = index.resolve(entry)
                row.problem = path.stem
            candidate = Candidate(source=entry.code, name=entry.key,
                                  metadata={"audit_source": entry.source, "claimed_speedup": entry.claimed_speedup})
            for p in dict.fromkeys([precision, "ieee"]):
                task = index.task(path, p, entry.level)
                row.points[p] = (task, candidate, _point_id(entry, task, candidate, p, device))
        except WorkbenchError as exc:
            row.points.clear()
            row.error = str(exc)
    return rows


def _journal(store: Store) -> dict[str, int]:
    """point id -> the row of its finished evaluation in the audit's store."""
    frame = store.frame(run_id=RUN_ID, source=False)
    return {str(pid): int(row_id) for pid, row_id in zip(frame["point_id"], frame["id"], strict=True)}


def _evaluate(todo: list[tuple[Task, Candidate, str]], opts: EvalOptions, store: Store, progress: bool,
              results: dict[str, Result]) -> None:
    from tqdm.auto import tqdm

    from workbench.eval.evaluate import evaluate_pairs

    with tqdm(total=len(todo), desc="auditing", unit="evaluation", disable=not progress) as bar:
        def done(i: int, result: Result) -> None:
            task, candidate, point_id = todo[i]
            if result.status != "cancelled":
                store.add(result, run_id=RUN_ID, point_id=point_id, audit_kernel=candidate.name)
            results[point_id] = result
            bar.update(1)
            bar.set_postfix_str(f"{candidate.name}: {result.status}", refresh=False)

        evaluate_pairs([(task, candidate) for task, candidate, _ in todo], opts, done)


def run_audit(release: str | Path, *, manifest: str | Path | None = None, problems: list[str | Path] | None = None,
              out: str | Path = "audit", device: str | None = None, precision: str = "ieee", resume: bool = False,
              fields: ReleaseFields | None = None, options: EvalOptions | None = None, progress: bool = True,
              report: bool = True) -> Audit:
    """Audit the kernels of `release` (a folder, a git checkout, a `.py` or a JSON release) against the problems
    under `problems` (KernelBench checkouts or folders; the release folder is searched too).

    precision: the precision a claim was measured under when its row does not say. resume: continue the audit
    already in `out` (without it, an `out` that holds one is an error, so nothing is overwritten). options: how each
    evaluation runs (rounds, timeouts); `device` overrides its device. Raises AuditInputError for an unreadable
    release or manifest, before anything runs; a problem that cannot be found is that row's verdict.
    """
    from workbench.eval.evaluate import resolve_options
    from workbench.store import Store
    from workbench.study.journal import Journal
    from workbench.tasks.precision import get_precision

    get_precision(precision)
    entries = read_release(release, manifest, fields)
    release_dir = Path(release) if Path(release).is_dir() else Path(release).parent
    index = ProblemIndex([*(problems or []), release_dir])
    opts = resolve_options(options, device, {})
    device_name = opts.device or "cpu"
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with Store(out_dir / STORE_NAME) as store:
        done = _journal(store)
        if done and not resume:
            raise AuditInputError(f"{out_dir} already holds an audit ({len(done)} evaluations); pass --resume "
                                  "(resume=True) to continue it, or give another --out")
        Journal(store.path).start_run(RUN_ID, str(release), {"manifest": str(manifest or ""), "precision": precision,
                                                            "problems": [str(p) for p in problems or []]}, {},
                                      device_name)
        rows = _plan(entries, index, precision, device_name, out_dir / "references")
        results = {pid: store.get(row_id) for pid, row_id in done.items()
                   if any(pid == point[2] for row in rows for point in row.points.values())}
        todo = [point for row in rows for point in row.points.values() if point[2] not in results]
        todo = list({point[2]: point for point in todo}.values())
        if todo:
            _evaluate(todo, opts, store, progress, results)
    frame = audit_frame([_table_row(row, results) for row in rows])
    csv = out_dir / "audit.csv"
    frame.to_csv(csv, index=False)
    html = None
    if report:
        from workbench.audit.report import write_report

        html = write_report(frame, out_dir / "audit.html", title=f"Audit of {Path(release).name}")
    ordered = [results[point[2]] for row in rows for point in row.points.values() if point[2] in results]
    return Audit(frame, out_dir, csv, html, evaluated=len(todo), reused=len(results) - len(todo),
                 results=list({id(r): r for r in ordered}.values()))


def _table_row(row: _Row, results: dict[str, Result]) -> dict[str, Any]:
    def result(precision: str) -> Result | None:
        point = row.points.get(precision)
        return results.get(point[2]) if point is not None else None

    at_claim = result(row.precision)
    return audit_row(row.entry, row.problem, row.precision, at_claim, result("ieee") or None,
                     row.error or ("" if at_claim is not None else "not evaluated"))
