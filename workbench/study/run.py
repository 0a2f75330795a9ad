"""Run study notebooks headlessly: a parameter grid, one papermill execution per point, results in one store.

A study is a notebook with a `parameters` cell (papermill's convention) that uses only the public API and
records its results with `StudyContext.add(result)`. The runner:
  * expands a grid (base parameters x `--grid grid.yaml` lists) into points with stable ids,
  * skips points already completed in an earlier run with the same run id (resume after a kill),
  * runs points concurrently, each in its own process with one GPU pinned (CUDA_VISIBLE_DEVICES),
  * retries kernel-start failures (port races, slow starts), keeps every executed notebook,
  * marks a point done only after its notebook finished, so a SIGKILL loses no completed point.
Points can also fan out over a Dask cluster (`cluster="local"`, `"local:N"`, `"dask://host:port"`,
`"slurm"`/`"pbs"` via dask-jobqueue).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cluster import gpu_count
from workbench.dispatch.gpus import physical_id
from workbench.errors import WorkbenchError, require
from workbench.study import failures
from workbench.study.context import StudyContext
from workbench.study.journal import Journal
from workbench.study.params import RUNNER_PARAMETERS, StudyInputError, check_grid, check_parameters, read_notebook
from workbench.study.paths import CALLER_DIR_ENV, NOTEBOOK_DIR_ENV

__all__ = ["RUNNER_PARAMETERS", "StudyError", "StudyInputError", "StudyPoint", "PointOutcome", "StudyRun", "Journal",
           "StudyContext", "expand_grid", "load_grid", "parse_parameter", "plan", "run_point", "run_study"]

#: Messages from a kernel that failed to start, not from the notebook's code: worth a retry.
_RETRYABLE = ("ZMQError", "Address already in use", "Kernel died before replying", "kernel_info", "DeadKernelError",
              "Kernel didn't respond", "TimeoutError: Kernel")


class StudyError(WorkbenchError):
    """A study could not be run; carries the failing point when there is one."""

    def __init__(self, message: str, point: StudyPoint | None = None):
        self.point = point
        super().__init__(message)


@dataclass(frozen=True)
class StudyPoint:
    """One execution of a notebook: its parameters and a stable id derived from them."""

    notebook: str
    parameters: dict[str, Any]
    #: Added by the runner (store_path, run_id); not part of the point's identity.
    run_parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        blob = json.dumps({"nb": Path(self.notebook).name, "p": self.parameters}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def papermill_parameters(self) -> dict[str, Any]:
        return {**self.parameters, **self.run_parameters, "point_id": self.id}

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.parameters.items()) or "(defaults)"


@dataclass
class PointOutcome:
    point: StudyPoint
    status: str  # "done" | "failed" | "skipped"
    output: str | None = None
    error: str = ""
    seconds: float = 0.0
    attempts: int = 0


@dataclass
class StudyRun:
    run_id: str
    notebook: str
    store_path: str
    out_dir: str
    outcomes: list[PointOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[PointOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def summary(self) -> str:
        counts = {s: sum(o.status == s for o in self.outcomes) for s in ("done", "skipped", "failed")}
        return f"run {self.run_id}: " + ", ".join(f"{n} {s}" for s, n in counts.items())


# ---- grids --------------------------------------------------------------------------------------------

def expand_grid(base: dict[str, Any] | None = None, grid: dict[str, Iterable[Any]] | None = None) -> list[dict[str, Any]]:
    """Cartesian product of `grid` lists on top of `base` values; a scalar in `grid` counts as one value."""
    base = dict(base or {})
    grid = {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in (grid or {}).items()}
    if not grid:
        return [base]
    keys = list(grid)
    return [{**base, **dict(zip(keys, combo, strict=False))} for combo in itertools.product(*(grid[k] for k in keys))]


def load_grid(path: str | Path) -> dict[str, list[Any]]:
    """A grid file: YAML (or JSON) mapping parameter name -> list of values. Every way a grid file can be
    wrong is a StudyInputError that names the file and, for syntax errors, the line."""
    path = Path(path)
    if not path.is_file():
        raise StudyInputError(f"grid file {path} does not exist" if not path.exists() else f"grid file {path} is not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StudyInputError(f"grid file {path} is not UTF-8 text; write it as YAML or JSON") from exc
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StudyInputError(f"grid file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                                  f"column {exc.colno}") from exc
    else:
        yaml = require("yaml", "lab", "reading a YAML grid", package="pyyaml")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise StudyInputError(f"grid file {path} is not valid YAML: {problem}{where}") from exc
    if not isinstance(data, dict) or not data:
        raise StudyInputError(f"grid file {path} must map parameter names to lists of values, e.g. "
                              "`block: [64, 128]` on one line per parameter")
    empty = [k for k, v in data.items() if isinstance(v, (list, tuple)) and not v]
    if empty:
        raise StudyInputError(f"grid file {path}: {', '.join(map(str, empty))} has an empty list of values; "
                              "give at least one value")
    return {str(k): v for k, v in data.items()}


def parse_parameter(value: str) -> Any:
    """`-p name value` values: JSON when they parse (numbers, lists, true/false), else the plain string."""
    try:
        return json.loads(value)
    except (json.JSONDecodeError, ValueError):
        return value


# ---- running one point ----------------------------------------------------------------------------------

def run_point(point: StudyPoint, out_path: str, *, slot: int | None = None, kernel_name: str = "python3",
              retries: int = 2, timeout: float | None = None, cwd: str | None = None) -> PointOutcome:
    """Execute one point in a fresh process (so each gets its own GPU pin and a clean kernel)."""
    env = dict(os.environ)
    gpus = gpu_count() if slot is not None else 0
    if gpus > 0:
        env["CUDA_VISIBLE_DEVICES"] = physical_id(f"cuda:{slot % gpus}")
    # The notebook resolves its data beside itself, and paths given on the command line from where kwb ran.
    env[NOTEBOOK_DIR_ENV] = str(Path(point.notebook).resolve().parent)
    env.setdefault(CALLER_DIR_ENV, os.getcwd())
    request = {
        "input": str(point.notebook), "output": out_path, "parameters": point.papermill_parameters(),
        "kernel_name": kernel_name, "cwd": cwd or str(Path(point.notebook).resolve().parent),
    }
    started = time.perf_counter()
    error = ""
    for attempt in range(1, retries + 2):
        proc = subprocess.run(
            [sys.executable, "-m", "workbench.study.point", json.dumps(request)],
            env=env, capture_output=True, text=True, timeout=timeout,
        )
        if proc.returncode == 0:
            return PointOutcome(point, "done", out_path, "", time.perf_counter() - started, attempt)
        error = proc.stderr or proc.stdout or ""
        if not any(marker in error for marker in _RETRYABLE):
            break
        time.sleep(1.0 * attempt)
    return PointOutcome(point, "failed", out_path, failures.from_output(error, out_path),
                        time.perf_counter() - started, attempt)


# ---- running a whole study --------------------------------------------------------------------------------

def new_run_id(notebook: str | Path) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{Path(notebook).stem}-{stamp}-{uuid.uuid4().hex[:4]}"


def plan(notebook: str | Path, parameters: dict[str, Any] | None = None, grid: dict[str, Any] | None = None, *,
         store_path: str, run_id: str, device: str | None = None) -> list[StudyPoint]:
    """The points of a study with the runner's parameters filled in."""
    run_parameters = {"store_path": str(Path(store_path).resolve()), "run_id": run_id}
    points = []
    for params in expand_grid(parameters, grid):
        if device is not None:
            params.setdefault("device", device)
        points.append(StudyPoint(str(notebook), params, run_parameters))
    return points


def run_study(notebook: str | Path, parameters: dict[str, Any] | None = None, grid: dict[str, Any] | None = None, *,
              store_path: str = "results.db", out_dir: str = "runs", run_id: str | None = None,
              parallel: int = 1, device: str | None = None, cluster: str | None = None, retries: int = 2,
              kernel_name: str = "python3", timeout: float | None = None, progress: bool = True,
              on_point: Callable[[PointOutcome], None] | None = None, check: bool = True) -> StudyRun:
    """Run every grid point of `notebook`; rerunning with the same `run_id` skips completed points.

    check: refuse parameter names the notebook's `parameters` cell does not define (and values that cannot
    match a numeric or boolean default) before anything runs; see workbench.study.params."""
    notebook = str(Path(notebook).resolve())
    read_notebook(notebook)  # a missing or broken notebook fails here, before any point runs
    if check:
        check_parameters(notebook, [*(parameters or {})] + (["device"] if device is not None else []),
                         parameters or {}, source="-p")
        check_grid(notebook, grid or {})
    run_id = run_id or new_run_id(notebook)
    journal = Journal(store_path)
    journal.start_run(run_id, notebook, parameters or {}, grid or {}, device)
    run_dir = Path(out_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run = StudyRun(run_id, notebook, str(store_path), str(run_dir))

    points = plan(notebook, parameters, grid, store_path=store_path, run_id=run_id, device=device)
    done = journal.done_points(run_id)
    todo = []
    for point in points:
        if point.id in done:
            run.outcomes.append(PointOutcome(point, "skipped"))
        else:
            todo.append(point)

    def finish(outcome: PointOutcome) -> None:
        journal.record(run_id, outcome)
        run.outcomes.append(outcome)
        if on_point:
            on_point(outcome)

    bar = _progress(len(points), initial=len(points) - len(todo), enabled=progress, desc=Path(notebook).stem)
    outputs = {p.id: str(run_dir / f"{Path(notebook).stem}-{p.id}.ipynb") for p in todo}
    try:
        if cluster:
            _run_on_dask(todo, outputs, cluster, parallel, kernel_name, retries, timeout, finish, bar)
        else:
            _run_local(todo, outputs, parallel, kernel_name, retries, timeout, finish, bar)
    finally:
        bar.close()
    return run


def _run_local(todo, outputs, parallel, kernel_name, retries, timeout, finish, bar) -> None:
    slots = list(range(max(1, parallel)))
    free = list(slots)
    lock = threading.Lock()

    def work(point: StudyPoint) -> PointOutcome:
        with lock:
            slot = free.pop(0)
        try:
            return run_point(point, outputs[point.id], slot=slot, kernel_name=kernel_name,
                             retries=retries, timeout=timeout)
        finally:
            with lock:
                free.append(slot)

    with ThreadPoolExecutor(max_workers=len(slots)) as pool:
        futures = [pool.submit(work, p) for p in todo]
        for fut in as_completed(futures):
            outcome = fut.result()
            finish(outcome)
            bar.set_postfix_str(f"last: {outcome.status}")
            bar.update(1)


def _dask_point(point: StudyPoint, output: str, kernel_name: str, retries: int, timeout: float | None) -> PointOutcome:
    """Runs on a Dask worker: the worker's index (its name) picks the GPU."""
    slot = None
    try:
        from distributed import get_worker

        name = get_worker().name
        slot = int(name) if str(name).isdigit() else None
    except Exception:  # pragma: no cover - outside a worker
        pass
    return run_point(point, output, slot=slot, kernel_name=kernel_name, retries=retries, timeout=timeout)


def make_client(cluster: str, parallel: int = 1) -> tuple[Any, Any]:
    """A Dask client for `cluster` (`workbench/cluster.py`)."""
    from workbench.cluster import make_client as client_for

    return client_for(cluster, parallel, "running studies on a Dask cluster")


def _run_on_dask(todo, outputs, cluster, parallel, kernel_name, retries, timeout, finish, bar) -> None:
    client, owned = make_client(cluster, parallel)
    try:
        distributed = require("distributed", "dask", "running studies on a Dask cluster")
        futures = [client.submit(_dask_point, p, outputs[p.id], kernel_name, retries, timeout, pure=False)
                   for p in todo]
        for fut in distributed.as_completed(futures):
            outcome = fut.result()
            finish(outcome)
            bar.set_postfix_str(f"last: {outcome.status}")
            bar.update(1)
    finally:
        client.close()
        if owned is not None:
            owned.close()


def _progress(total: int, initial: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, desc=desc, unit="point", file=sys.stderr)
