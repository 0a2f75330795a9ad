"""Workbench kernel time vs Nsight Compute's gpu__time_duration, for built-in tasks' reference Triton solutions.

For each task (default softmax, layernorm, matmul at their GPU preset sizes) it takes the median the engine
reports (`wb.evaluate`: CUDA events, L2 flushed before each call, interleaved with the reference) and the
kernels' own durations as ncu measures them (caches flushed between replays, clocks left as the GPU sets them,
like the engine), per forward. Target: within 3% for forwards of >= 20 us. ncu's DRAM bytes are printed beside
the task's analytic minimal bytes. Needs torch + triton and ncu on PATH; says so and exits 0 without them.

    PYTHONPATH=. python benchmarks/roofline_ncu.py [--tasks softmax,layernorm,matmul] [--json out.json]

`--target NAME` is the program ncu runs: it builds the solution, warms it up (compile, autotune) and runs a few
forwards between cudaProfilerStart/Stop, which is all ncu profiles (`--profile-from-start off`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

TARGET = 0.03
MIN_MS = 0.020
CALLS = 5


def run_target(name: str, calls: int) -> int:
    """Inside ncu: warm up the task's solution, then profile `calls` forwards."""
    import torch

    import workbench as wb
    from workbench.eval.runner.loading import load_candidate

    task = wb.get_task(name)
    size = task.size("gpu")
    ref = task.load()
    _, cls = load_candidate(task.solution_candidate().to_spec(), "cuda")
    model = cls(*ref.init_inputs(size, 0))
    model = model.cuda() if hasattr(model, "cuda") else model
    inputs = ref.make_inputs(size, 1, "cuda")
    with torch.no_grad():
        for _ in range(3):  # compile + autotune outside the profiled range
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for _ in range(calls):
            model(*inputs)
            torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


def _per_forward(seconds: list[float], calls: int) -> tuple[float, int]:
    """(median per-forward sum, launches per forward) from launch durations in order."""
    if not seconds:
        return float("nan"), 0
    per = max(1, len(seconds) // calls)
    sums = [sum(seconds[i:i + per]) for i in range(0, per * calls, per) if len(seconds[i:i + per]) == per]
    return statistics.median(sums), per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="softmax,layernorm,matmul")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument("--target", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=CALLS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.target:
        return run_target(args.target, args.calls)

    import torch

    from roofline import ncu

    if not torch.cuda.is_available():
        print("roofline_ncu: no CUDA GPU here; this benchmark compares GPU kernel times with Nsight Compute.")
        return 0
    if not ncu.available():
        print("roofline_ncu: Nsight Compute (ncu) is not on PATH; install it (it ships with the CUDA toolkit) to "
              "compare the workbench's kernel times with hardware counters.")
        return 0
    import workbench as wb

    root = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    started = time.perf_counter()
    rows = []
    device_name = "?"
    for name in args.tasks.split(","):
        task = wb.get_task(name)
        t0 = time.perf_counter()
        res = wb.evaluate(task, task.solution_candidate(), device="cuda", compile_reference=False)
        device_name = res.device_name or device_name
        row = {"task": name, "size": task.size("gpu"), "status": res.status,
               "workbench_ms": res.timing.median_ms if res.timing else float("nan"),
               "workbench_iqr_ms": res.timing.iqr_ms if res.timing else float("nan"),
               "analytic_bytes": res.bytes, "sol": res.sol_fraction}
        try:
            kernels = ncu.run_ncu([sys.executable, str(Path(__file__).resolve()), "--target", name,
                                   "--calls", str(args.calls)],
                                  metrics=["gpu__time_duration.sum", "dram__bytes.sum"],
                                  extra_args=["--profile-from-start", "off"], timeout=240)
            ncu_s, per = _per_forward([k.seconds or 0.0 for k in kernels], args.calls)
            dram, _ = _per_forward([k.dram_bytes or 0.0 for k in kernels], args.calls)
            row.update(ncu_ms=ncu_s * 1e3, launches_per_forward=per, ncu_dram_bytes=dram,
                       kernels=sorted({k.name[:40] for k in kernels}))
        except ncu.NcuError as exc:
            row.update(ncu_ms=float("nan"), launches_per_forward=0, ncu_dram_bytes=float("nan"), error=str(exc)[:300])
        row["ratio"] = row["workbench_ms"] / row["ncu_ms"] if row["ncu_ms"] == row["ncu_ms"] else float("nan")
        rows.append(row)
        print(f"[{name}] {res.summary()}; ncu {row['ncu_ms']:.4f} ms ({time.perf_counter() - t0:.0f} s)"
              + (f"; {row['error']}" if "error" in row else ""), file=sys.stderr, flush=True)

    print(f"\n## Workbench timing vs Nsight Compute on {device_name} "
          f"({time.perf_counter() - started:.0f} s)\n")
    print("| task | size | status | workbench median (ms) | ncu gpu__time_duration (ms) | workbench / ncu | "
          "launches | ncu DRAM bytes | analytic bytes | DRAM / analytic |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    judged = []
    for r in rows:
        dram_ratio = r["ncu_dram_bytes"] / r["analytic_bytes"] if r.get("analytic_bytes") else float("nan")
        print(f"| {r['task']} | {json.dumps(r['size'])} | {r['status']} | {r['workbench_ms']:.4f} | {r['ncu_ms']:.4f} | "
              f"{r['ratio']:.3f} | {r['launches_per_forward']} | {r['ncu_dram_bytes']:.4g} | "
              f"{r['analytic_bytes'] or float('nan'):.4g} | {dram_ratio:.3f} |")
        if r["ncu_ms"] >= MIN_MS:
            judged.append(abs(r["ratio"] - 1.0))
    complete = all(r["status"] == "ok" and r["ncu_ms"] == r["ncu_ms"] for r in rows)  # NaN: ncu failed
    ok = complete and bool(judged) and max(judged) <= TARGET
    worst = max(judged) if judged else float("nan")
    print(f"\nworst |workbench/ncu - 1| over forwards >= {MIN_MS * 1e3:.0f} us: {worst:.3f} (target <= {TARGET}): "
          f"{'PASS' if ok else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": device_name, "rows": rows, "pass": ok}, fh, indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
