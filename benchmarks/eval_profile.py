"""Where one evaluation's seconds go, function by function: evaluates a built-in solution a few times with the
judge under cProfile (KWB_JUDGE_PROFILE) and prints each evaluation's stage seconds, the timing stage's phases and
the judge's most expensive functions in the last (warm) evaluation.

    PYTHONPATH=. python benchmarks/eval_profile.py --device cuda --task softmax --reps 3 [--out prof]
    PYTHONPATH=. python benchmarks/eval_profile.py --device cuda --kernelbench PROBLEM.py [--warm-with softmax]

`--kernelbench` profiles a KernelBench problem's reference judged against itself at its real size; `--warm-with`
first evaluates a built-in task once, unprofiled, so the judge pool is warm as in a session.
"""

from __future__ import annotations

import argparse
import glob
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


_PROFILER_COST = r"""
import sys, time, torch
from torch.profiler import ProfilerActivity, profile
x = torch.randn(4096, 4096, device=sys.argv[1]); torch.cuda.synchronize()
out = []
for _ in range(3):
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.softmax(x, -1); torch.cuda.synchronize()
    t1 = time.perf_counter()
    n = len(prof.events())
    out.append(f"{t1 - t0:.2f}s + events {time.perf_counter() - t1:.2f}s ({n})")
print("; ".join(out))
"""


def profiler_cost(device: str) -> str:
    """Seconds of three torch.profiler sessions in a fresh process (a runner is fresh for every candidate)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _PROFILER_COST, device], capture_output=True, text=True, timeout=300)
    return out.stdout.strip() or out.stderr[-500:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--task", default="softmax")
    parser.add_argument("--kernelbench", help="a KernelBench problem file, judged against itself")
    parser.add_argument("--warm-with", help="a built-in task evaluated once first, outside the profile")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--out", default=None, help="folder for the .prof files (a temporary one by default)")
    args = parser.parse_args()
    folder = args.out or tempfile.mkdtemp(prefix="kwb_prof_")
    os.environ["KWB_JUDGE_PROFILE"] = folder  # the judge reads it when it starts
    import workbench as wb

    if args.warm_with:  # its profile is written too; the one printed is the last evaluation's
        warm = wb.get_task(args.warm_with)
        print("warm-up:", wb.evaluate(warm, warm.solution_candidate(), device=args.device).status)
    if args.kernelbench:
        from workbench.tasks.kernelbench import reference_as_candidate

        task = wb.load_kernelbench(args.kernelbench)
        cand = reference_as_candidate(task)
    else:
        task = wb.get_task(args.task)
        cand = task.solution_candidate()
    for i in range(args.reps):
        t0 = time.perf_counter()
        res = wb.evaluate(task, cand, device=args.device)
        wall = time.perf_counter() - t0
        phases = (res.protocol or {}).get("timing_phases", {})
        print(f"evaluation {i}: {res.status} {wall:.2f}s speedup {res.speedup}")
        print("  stages:", res.stage_seconds)
        print("  timing phases:", phases)
        proto = res.protocol or {}
        print("  check phases:", proto.get("check_phases"), "| batches", proto.get("timed_batches"),
              "x", proto.get("calls_per_batch"), "| compiled reference", proto.get("compiled_reference"),
              "| stop", res.timing.stop_reason if res.timing else None)
    if args.device.startswith("cuda"):
        print("torch.profiler in a fresh process:", profiler_cost(args.device))
    files = sorted(glob.glob(os.path.join(folder, "*.prof")), key=os.path.getmtime)
    if files:
        print(f"\njudge profile of the last evaluation ({files[-1]}), by cumulative time:")
        pstats.Stats(files[-1]).sort_stats("cumulative").print_stats(args.top)
        print("by own time:")
        pstats.Stats(files[-1]).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
