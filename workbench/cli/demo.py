"""`kwb demo`: every built-in task's reference Triton solution on the default device, plus one cheat that the
checker must reject; a results table, a store and an HTML report. The quickest proof that an install works."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.cli.common import EXIT_FAILED, EXIT_OK, device_arg, open_store
from workbench.cli.format import format_table, ms_text, sol_text, speedup_text

#: A candidate that lets PyTorch do all the work: the demo shows it being rejected.
CHEAT_SOFTMAX = '''"""Submitted as a Triton kernel, but torch.softmax does the work: no kernel of its own."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


def run_demo(device: str | None = None, store_path: str = "demo.db", task_names: Sequence[str] | None = None,
             run_id: str | None = None, progress: bool = True) -> tuple[list[tuple[Any, str]], str]:
    """The main job on the default device: each built-in task's reference Triton solution, plus one cheating
    candidate that must be rejected. Returns ([(result, expected status)], run id); results go to the store."""
    import workbench
    from workbench.candidate import Candidate
    from workbench.eval.evaluate import default_device, evaluate

    device = device or default_device()
    names = list(task_names) if task_names else [n for n in workbench.tasks() if workbench.get_task(n).solution]
    run_id = run_id or f"demo-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    jobs: list[tuple[Any, Any, str]] = [(workbench.get_task(n), None, "ok") for n in names]
    if "softmax" in names:
        jobs.append((workbench.get_task("softmax"),
                     Candidate(source=CHEAT_SOFTMAX, language="triton", name="softmax-torch-cheat"), "rejected"))
    out = []
    with open_store(store_path) as store:
        for i, (task, cand, expected) in enumerate(jobs, 1):
            cand = cand or task.solution_candidate()
            label = f"[{i}/{len(jobs)}] {task.name}: {cand.name}"
            started = time.perf_counter()
            if progress:
                print(f"{label} ...", file=sys.stderr, flush=True)
            result = evaluate(task, cand, device)
            store.add(result, run_id=run_id, command="kwb demo", expected=expected)
            out.append((result, expected))
            if progress:
                mark = "as expected" if result.status == expected else f"EXPECTED {expected}"
                print(f"{label}: {result.status} {ms_text(result.time_ms)} ({mark}, "
                      f"{time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)
    return out, run_id


def cmd_demo(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.tasks.split(",") if n.strip()] if args.tasks else None
    if names:
        import workbench

        for n in names:
            workbench.get_task(n)  # unknown names fail before any work, listing the known ones
    started = time.perf_counter()
    results, run_id = run_demo(args.device, args.store, names)
    rows = []
    for res, expected in results:
        clock = res.timing.clock if res.timing else "-"
        rows.append((res.task, res.candidate_name, res.status, ",".join(res.flags) or "-", ms_text(res.time_ms),
                     clock, speedup_text(res), sol_text(res),
                     "yes" if res.status == expected else f"NO (expected {expected})"))
    print(format_table(rows, ["task", "candidate", "status", "flags", "time", "clock", "speedup", "SOL", "as expected"]))
    surprises = [r for r, e in results if r.status != e]
    if not args.no_report:
        print(write_demo_report(args.store, run_id, args.report))
    print(f"\n{len(results)} evaluations in {time.perf_counter() - started:.0f} s; results in "
          f"{Path(args.store).resolve()} (run {run_id}); see them with `kwb results --store {args.store} --run {run_id}`")
    for res in surprises:
        print(f"\n{res.task}/{res.candidate_name}: {res.status}\n{res.message}", file=sys.stderr)
    return EXIT_FAILED if surprises else EXIT_OK


def results_folder(store_path: str) -> Path:
    """Where reports go: `runs/` beside the store (never the working directory itself)."""
    return Path(store_path).resolve().parent / "runs"


def write_demo_report(store_path: str, run_id: str, output: str | None = None) -> str:
    """The run's HTML report (default: runs/RUN/report.html beside the store, with plotly.js shared in runs/)
    when the lab extra (plotly) is installed; otherwise how to get it."""
    import importlib

    try:
        write_report = importlib.import_module("widgets.report").write_report
    except ImportError as exc:  # MissingDependencyError is an ImportError too
        return f"HTML report skipped ({exc}); `kwb doctor` lists what to install"
    folder = results_folder(store_path)
    if output:
        path = write_report(store_path, run_id, output)
    else:
        path = write_report(store_path, run_id, folder / run_id / "report.html", library_dir=folder)
    return f"HTML report: {Path(path).resolve()}"


def add_demo_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="evaluate every built-in task's reference solution and one cheat")
    p.add_argument("--device", type=device_arg, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--store", default="demo.db", help="results store to write (default demo.db)")
    p.add_argument("--tasks", help="comma-separated task names (default: every task with a solution)")
    p.add_argument("--report", help="HTML report file (default: runs/RUN/report.html beside the store)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.set_defaults(handler=cmd_demo)
