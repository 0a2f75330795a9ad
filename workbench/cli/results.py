"""`kwb results`, `kwb tasks`, `kwb flags`, `kwb doctor`: commands that read and print, never evaluate."""

from __future__ import annotations

import argparse
import json

from workbench.cli.common import EXIT_OK, open_store, positive
from workbench.cli.format import format_table, missing, size_text

RESULT_COLUMNS = ["id", "run_id", "task", "candidate_name", "status", "flags", "size", "device", "time_median_ms",
                  "clock", "ref_median_ms", "speedup", "sol_fraction"]


def cmd_results(args: argparse.Namespace) -> int:
    with open_store(args.store, create=False) as store:
        frame = store.frame(task=args.task, status=args.status, run_id=args.run, source=False)
    if args.json:
        print(json.dumps(json.loads(frame.to_json(orient="records")), indent=2))  # NaN -> null
        return EXIT_OK
    if frame.empty:
        print(f"no results in {args.store}" + (" matching the filters" if args.task or args.status or args.run else ""))
        return EXIT_OK
    view = frame[RESULT_COLUMNS].tail(args.limit).copy()
    view["flags"] = view["flags"].map(lambda f: ",".join(f) or "-")
    view["size"] = view["size"].map(size_text)
    rows = [[("-" if missing(v) or v in ("None", "nan") else (f"{v:.4g}" if isinstance(v, float) else v))
             for v in row] for row in view.itertuples(index=False)]
    print(format_table(rows, RESULT_COLUMNS, max_width=40))
    if len(frame) > args.limit:
        print(f"({len(frame) - args.limit} earlier rows not shown; --limit N shows more)")
    return EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    import workbench

    names = workbench.tasks()
    if not names:
        print("no tasks registered")
        return EXIT_OK
    rows, records = [], []
    for name in names:
        task = workbench.get_task(name)
        cpu, gpu = task.sizes.get("cpu"), task.sizes.get("gpu")
        rows.append((name, ",".join(task.dtypes), size_text(cpu) if cpu else "-", size_text(gpu) if gpu else "-",
                     task.description))
        records.append({"name": name, "dtypes": list(task.dtypes), "cpu": cpu, "gpu": gpu,
                        "description": task.description, "has_solution": bool(task.solution)})
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        print(format_table(rows, ["name", "dtypes", "cpu size", "gpu size", "description"], max_width=48))
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from workbench.cli.doctor import format_report, report

    data = report()
    print(json.dumps(data, indent=2) if args.json else format_report(data))
    return EXIT_OK


def cmd_flags(args: argparse.Namespace) -> int:
    from workbench.eval.checks.flags import flag_table_markdown

    print(flag_table_markdown())
    return EXIT_OK


def add_read_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list the registered tasks")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=cmd_tasks)

    p = sub.add_parser("results", help="show what a results store holds")
    p.add_argument("--store", default="results.db")
    p.add_argument("--task")
    p.add_argument("--status")
    p.add_argument("--run", help="only this run id")
    p.add_argument("--limit", type=positive(int), default=50, help="show the last N rows (default 50)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_results)

    p = sub.add_parser("doctor", help="versions, device, interpreter mode, what is missing and how to get it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_doctor)

    p = sub.add_parser("flags", help="the catalog of check flags (markdown table)")
    p.set_defaults(handler=cmd_flags)
