"""One evaluation as a timeline: what the judge did, what it sent each runner and when the answers came, and what
ran beside it (the reference's runner, the next candidate's spare, the reference's background compile). Stage
seconds say how long; this says what waited on what.

    PYTHONPATH=. python benchmarks/eval_trace.py --device cuda --kernelbench PROBLEM.py [PROBLEM.py ...] --warm-with softmax
    PYTHONPATH=. python benchmarks/eval_trace.py --device cpu --task softmax --reps 2

Each problem's reference is judged against itself (first evaluation of the task in a warm judge, as in
`eval_vs_kernelbench.py`). Consecutive events of one kind are folded into one line with their count and span.
The judge writes the raw events (`KWB_JUDGE_TRACE`, `workbench/eval/judge/trace.py`) as JSON lines in `--out`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def read(path: str) -> tuple[str, list[dict[str, Any]]]:
    lines = Path(path).read_text().splitlines()
    return json.loads(lines[0])["label"], [json.loads(line) for line in lines[1:]]


def folded(events: list[dict[str, Any]]) -> list[str]:
    """The events as lines; a run of events with the same name and thread is one line (count, first and last)."""
    out: list[str] = []
    i = 0
    while i < len(events):
        e = events[i]
        j = i
        while j + 1 < len(events) and events[j + 1]["name"] == e["name"] and events[j + 1]["thread"] == e["thread"] \
                and "ms" not in e:
            j += 1
        thread = "" if e["thread"] == "MainThread" else f" [{e['thread']}]"
        extra = {k: v for k, v in e.items() if k not in ("t", "name", "thread", "ms")}
        thread += f" {extra}" if extra else ""
        if j > i:
            out.append(f"{e['t']:9.1f} .. {events[j]['t']:9.1f} ms  {e['name']} x{j - i + 1}{thread}")
        elif "ms" in e:
            out.append(f"{e['t']:9.1f} +{e['ms']:8.1f} ms  {e['name']}{thread}")
        else:
            out.append(f"{e['t']:9.1f}            {e['name']}{thread}")
        i = j + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--task", default="softmax")
    parser.add_argument("--kernelbench", nargs="*", default=[], help="KernelBench problem files, each judged "
                        "against itself")
    parser.add_argument("--warm-with", help="a built-in task evaluated once first (its trace is not printed)")
    parser.add_argument("--reps", type=int, default=1, help="evaluations of each task (the last one is printed "
                        "with every earlier one)")
    parser.add_argument("--no-compile", action="store_true", help="without the torch.compile line "
                        "(compile_reference=False)")
    parser.add_argument("--out", default=None, help="folder for the raw traces (a temporary one by default)")
    args = parser.parse_args()
    folder = args.out or tempfile.mkdtemp(prefix="kwb_trace_")
    os.environ["KWB_JUDGE_TRACE"] = folder  # the judge reads it for every evaluation
    import workbench as wb
    from workbench.tasks.kernelbench import reference_as_candidate

    if args.warm_with:
        warm = wb.get_task(args.warm_with)
        print("warm-up:", wb.evaluate(warm, warm.solution_candidate(), device=args.device).status)
    pairs = []
    for path in args.kernelbench:
        task = wb.load_kernelbench(path)
        pairs.append((task, reference_as_candidate(task)))
    if not args.kernelbench:
        task = wb.get_task(args.task)
        pairs.append((task, task.solution_candidate()))
    for task, cand in pairs:
        for rep in range(args.reps):
            before = set(glob.glob(os.path.join(folder, "trace-*.jsonl")))
            started = time.perf_counter()
            res = wb.evaluate(task, cand, device=args.device, compile_reference=not args.no_compile)
            wall = time.perf_counter() - started
            print(f"\n=== {task.name} evaluation {rep}: {res.status} in {wall:.2f} s; stages {res.stage_seconds}")
            new = sorted(set(glob.glob(os.path.join(folder, "trace-*.jsonl"))) - before)
            for path in new:
                label, events = read(path)
                print(f"--- {label} ({len(events)} events, {path})")
                print("\n".join(folded(events)))


if __name__ == "__main__":
    main()
