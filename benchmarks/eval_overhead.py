"""What the trust boundary costs: wall time of one evaluation of the built-in softmax solution, before and after the
judge/runner split, and the start-up time of a sandboxed runner.

    python benchmarks/eval_overhead.py --device cuda --before .old     # .old: a checkout of the earlier engine
    python benchmarks/eval_overhead.py --device cpu --reps 5 --before .pre --alternate 3

"Before" runs the same script against another checkout (its `workbench` package first on PYTHONPATH) in a
separate process. Each side evaluates once to warm up (process start, imports, compilation caches), then
`--reps` times; the medians are compared. `--alternate N` measures the sides in turn N times (after, before,
after, ...) and pools each side's times, so a load that changes on a shared host weighs on both alike. Beside the
wall time, the CPU seconds of every process of the evaluation (the measuring process and its descendants, from
/proc): steadier than wall time where other work shares the cores. Prints one line per figure and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = r"""
import json, os, sys, time
os.environ.setdefault("TRITON_INTERPRET", "1" if sys.argv[1] == "cpu" else "")
if sys.argv[1] != "cpu":
    os.environ.pop("TRITON_INTERPRET", None)
import workbench as wb

def tree_cpu():
    # CPU seconds of this process and every live descendant, each with its reaped children's (Linux /proc)
    tick, parents, cpu = os.sysconf("SC_CLK_TCK"), {}, {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        parents[int(name)] = int(fields[1])
        cpu[int(name)] = sum(int(v) for v in fields[11:15]) / tick
    def mine(pid):
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parents.get(pid, 0)
        return False
    return sum(v for pid, v in cpu.items() if mine(pid))

task = wb.get_task("softmax")
cand = task.solution_candidate()
times, cpus, statuses, sandbox, stages, speedups, why, phases = [], [], [], None, [], [], [], []
for i in range(int(sys.argv[2]) + 1):
    c0, t0 = tree_cpu(), time.perf_counter()
    r = wb.evaluate(task, cand, device=sys.argv[1])
    if i:
        times.append(time.perf_counter() - t0)
        cpus.append(tree_cpu() - c0)
    statuses.append(r.status)
    sandbox = getattr(r, "sandbox", None)
    stages.append(getattr(r, "stage_seconds", None) or (getattr(r, "protocol", None) or {}).get("stage_seconds"))
    speedups.append(r.speedup)
    p = getattr(r, "protocol", None) or {}
    phases.append({**p.get("timing_phases", {}), "batches": p.get("timed_batches"), "calls": p.get("calls_per_batch")})
    if r.status != "ok":
        why.append(f"{r.status}: {getattr(r, 'flags', '')} {r.message[:300]} evidence={getattr(r, 'evidence', '')}")
print("RESULT " + json.dumps({"times": times, "cpu": cpus, "statuses": statuses, "sandbox": sandbox, "stages": stages,
                              "speedups": speedups, "why": why, "phases": phases}))
"""


def measure(code_root: Path, device: str, reps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code_root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _MEASURE, device, str(reps)], env=env, capture_output=True,
                         text=True, timeout=3600, cwd=str(code_root))
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"measuring {code_root} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return json.loads(line[len("RESULT "):])


def runner_startup(device: str, n: int) -> list[float]:
    """Seconds from asking the fork server for a runner to its Ready message (sandbox set up, CUDA not touched)."""
    sys.path.insert(0, str(ROOT))
    from workbench.eval.judge.runners.process import ForkServer, RunnerProcess

    server = ForkServer(device)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            runner = RunnerProcess.start(server, device)
            times.append(time.perf_counter() - t0)
            runner.close()
    finally:
        server.close()
    return times


def _pooled(runs: list[dict]) -> dict:
    """One side's measurements in turn, as one: every list concatenated, the last sandbox kind."""
    return {key: runs[-1][key] if key == "sandbox" else [v for run in runs for v in run.get(key, [])]
            for key in runs[0]}


def _fmt(values: list) -> str:
    return "[" + ", ".join("-" if v is None else f"{v:.3f}" for v in values) + "]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--before", type=Path, action="append", default=[],
                        help="a checkout of an earlier engine (repeatable; omit to skip)")
    parser.add_argument("--alternate", type=int, default=1,
                        help="measure the sides in turn this many times, pooling each side's times")
    args = parser.parse_args()
    if args.alternate < 1:
        parser.error("--alternate must be at least 1")
    befores: dict[Path, list[dict]] = {path: [] for path in args.before}
    afters = []
    for _ in range(args.alternate):
        afters.append(measure(ROOT, args.device, args.reps))
        for path in args.before:
            befores[path].append(measure(path.resolve(), args.device, args.reps))
    after = _pooled(afters)
    med_after = statistics.median(after["times"])
    print(f"after : {med_after:.3f} s per evaluation (median of {len(after['times'])}, statuses "
          f"{sorted(set(after['statuses']))}, sandbox {after['sandbox']}, speedups {_fmt(after['speedups'])})")
    for i, stage in enumerate(after["stages"]):
        print(f"  stages, evaluation {i}: " + ", ".join(f"{k} {v:.2f}s" for k, v in (stage or {}).items()))
    for i, phase in enumerate(after.get("phases", [])):
        print(f"  timing, evaluation {i}: " + ", ".join(f"{k} {v}" for k, v in (phase or {}).items()))
    for line in dict.fromkeys(after.get("why", [])):
        print(f"  not ok: {line}")
    for path in args.before:
        before = _pooled(befores[path])
        med_before = statistics.median(before["times"])
        print(f"before ({path.name}): {med_before:.3f} s per evaluation (median of {len(before['times'])}, statuses "
              f"{sorted(set(before['statuses']))}, speedups {_fmt(before['speedups'])})")
        print(f"ratio after/before ({path.name}): {med_after / med_before:.2f}x (target <= 1.0x against the engine "
              "before the sandbox)")
        cpu_after, cpu_before = statistics.median(after["cpu"]), statistics.median(before["cpu"])
        print(f"CPU seconds per evaluation, every process of the evaluation (caller, judge or worker, runners): "
              f"after {cpu_after:.3f}, before {cpu_before:.3f}, ratio {cpu_after / cpu_before:.2f}x")
    starts = runner_startup(args.device, 10)
    print(f"runner start-up (fork + sandbox + ready): median {1e3 * statistics.median(starts):.1f} ms, "
          f"max {1e3 * max(starts):.1f} ms over {len(starts)}")


if __name__ == "__main__":
    main()
