"""`kwb study run|report|status`: the command-line face of workbench.study.run.

Parameters are checked against the notebook's `parameters` cell before any point starts (a misspelled name
is an error with a suggestion, not a grid run on defaults); `-p` values parse as JSON, so
`-p variants '["solution", "a.py"]'` arrives as a list. A failed point prints its exception and failing line.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from workbench.cli.common import EXIT_FAILED, EXIT_OK, UsageError, check_store_path, datasheet_gpu, positive


def add_study_commands(subparsers: argparse._SubParsersAction) -> None:
    study = subparsers.add_parser("study", help="run study notebooks headlessly (papermill) and report on them")
    sub = study.add_subparsers(dest="study_command", required=True)

    run = sub.add_parser("run", help="run a study notebook over a parameter grid")
    run.add_argument("notebook", help="study notebook with a `parameters` cell")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="set a parameter (JSON values parse: 64, [1,2], true); repeatable")
    run.add_argument("--grid", help="YAML/JSON file: parameter -> list of values (cartesian product)")
    run.add_argument("--parallel", type=positive(int), default=1, help="concurrent points (one GPU pinned per point)")
    run.add_argument("--device", default=None, help="cpu or cuda (default: the notebook's own default)")
    run.add_argument("--store", default="results.db", help="results store (SQLite) shared by all points")
    run.add_argument("--out", default="runs", help="folder for executed notebooks (one subfolder per run)")
    run.add_argument("--run-id", default=None, help="resume this run: completed points are skipped")
    run.add_argument("--cluster", default=None, help="local, local:N, dask://host:port, slurm or pbs")
    run.add_argument("--retries", type=int, default=2, help="retries of kernel-start failures per point")
    run.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    run.add_argument("--report", action="store_true", help="write the HTML report when the run ends")
    run.set_defaults(handler=_run)

    report = sub.add_parser("report", help="render the HTML report of a run (plotly.js shared beside it)")
    report.add_argument("run_id")
    report.add_argument("--store", default="results.db")
    report.add_argument("--out", default="runs", help="results folder: the report goes to OUT/RUN/report.html and "
                                                      "plotly.js once into OUT (default runs)")
    report.add_argument("-o", "--output", default=None, help="HTML file instead (plotly.js is written beside it)")
    report.add_argument("--gpu", type=datasheet_gpu, default=None,
                        help="datasheet GPU that runs without GPU times are projected on (default: H100 SXM)")
    report.add_argument("--self-contained", action="store_true",
                        help="inline plotly.js (one ~5 MB file) instead of loading the shared copy beside it")
    report.set_defaults(handler=_report)

    status = sub.add_parser("status", help="list runs and their points")
    status.add_argument("--store", default="results.db")
    status.add_argument("run_id", nargs="?")
    status.set_defaults(handler=_status)


#: Parameters the runner passes itself (a -p value would be overridden silently), and the option to use instead.
_RUNNER_OPTIONS = {"store_path": "--store PATH", "run_id": "--run-id ID (to resume a run)",
                   "point_id": "nothing: point ids come from the parameters"}


def _parameters(pairs: list[list[str]]) -> dict:
    from workbench.study.run import parse_parameter

    params = {}
    for name, value in pairs:
        if not name.isidentifier():
            raise UsageError(f"-p {name} {value}: a parameter name is a Python identifier such as task_name")
        if name in _RUNNER_OPTIONS:
            raise UsageError(f"-p {name}: the runner sets {name} for every point; use {_RUNNER_OPTIONS[name]}")
        if name in params:
            raise UsageError(f"-p {name} is given twice; give each parameter once (a grid file sweeps values)")
        params[name] = parse_parameter(value)
    return params


def _run(args: argparse.Namespace) -> int:
    from workbench.study.params import check_grid, check_parameters
    from workbench.study.run import load_grid, run_study

    check_store_path(args.store)
    params = _parameters(args.parameter)
    grid = load_grid(args.grid) if args.grid else None
    # run_study checks again; checking here first keeps a typo's output to the error alone.
    check_parameters(args.notebook, [*params] + (["device"] if args.device else []), params)
    if grid:
        check_grid(args.notebook, grid, source=f"--grid {args.grid}")
    print(f"study {Path(args.notebook).name}: store {args.store}", file=sys.stderr)
    run = run_study(args.notebook, params, grid, store_path=args.store, out_dir=args.out, run_id=args.run_id,
                    parallel=args.parallel, device=args.device, cluster=args.cluster, retries=args.retries,
                    kernel_name=args.kernel)
    print(run.summary())
    for outcome in run.failed:
        print(f"FAILED {outcome.point.label()}\n{outcome.error}\n  executed notebook: {outcome.output}\n",
              file=sys.stderr)
    print(f"executed notebooks: {run.out_dir}")
    if args.report:
        from widgets.report import write_report

        # plotly.js once in the results folder, shared by every run's report under it.
        path = write_report(args.store, run.run_id, Path(run.out_dir) / "report.html", library_dir=args.out)
        print(f"report: {path}")
    print(f"run id: {run.run_id}  (resume with --run-id {run.run_id}; report with `{report_command(args, run)}`)")
    return EXIT_FAILED if run.failed else EXIT_OK


def report_command(args: argparse.Namespace, run) -> str:
    """The `kwb study report` line that reproduces this run's report from where the user is: with the --store
    the run used (the command's default is results.db) and the report beside the run's executed notebooks."""
    parts = ["kwb", "study", "report", run.run_id]
    if args.store != "results.db":
        parts += ["--store", args.store]
    if Path(args.out) != Path("runs"):
        parts += ["--out", args.out]
    return " ".join(shlex.quote(p) for p in parts)


def _existing_store(path: str) -> str:
    if not Path(path).is_file():
        raise UsageError(f"no results store at {path}; give the --store that `kwb study run` wrote")
    check_store_path(path, create=False)
    return path


def _report(args: argparse.Namespace) -> int:
    from widgets.report import write_report

    store = _existing_store(args.store)
    if args.output:  # plotly.js beside a report the user placed, else once in the results folder
        path = write_report(store, args.run_id, args.output, projection_gpu=args.gpu,
                            self_contained=args.self_contained)
    else:
        path = write_report(store, args.run_id, Path(args.out) / args.run_id / "report.html", library_dir=args.out,
                            projection_gpu=args.gpu, self_contained=args.self_contained)
    print(f"report: {path}")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from workbench.study.run import Journal

    journal = Journal(_existing_store(args.store))
    if not args.run_id:
        for run in journal.runs():
            print(f"{run['run_id']}  {Path(run['notebook']).name}  started {run['started']}")
        return EXIT_OK
    points = journal.points(args.run_id)
    if not points:
        known = [r["run_id"] for r in journal.runs()]
        raise UsageError(f"no points of run {args.run_id!r} in {args.store}; runs there: {', '.join(known) or '(none)'}")
    for point in points:
        print(f"{point['point_id']}  {point['status']:7s}  {point['seconds'] or 0:7.1f}s  {point['parameters']}")
        if point["status"] == "failed" and point["error"]:
            print("    " + point["error"].replace("\n", "\n    "))
    return EXIT_OK
