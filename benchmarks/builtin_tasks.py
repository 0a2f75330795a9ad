"""Every built-in task's reference Triton solution against its PyTorch reference, in one run.

Prints, per task at the device's preset size: candidate and reference (eager, torch.compile) median times with
spread (IQR) and 95% CI of the median, speedup, roofline share (SOL%) and bound. Run on a GPU:
    PYTHONPATH=. python benchmarks/builtin_tasks.py [--tasks softmax,matmul] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import workbench as wb


def fmt_timing(t) -> str:
    if t is None:
        return "n/a"
    return f"{t.median_ms:.4f} ms (IQR {t.iqr_ms:.4f}, CI [{t.ci95_low_ms:.4f}, {t.ci95_high_ms:.4f}], n={t.n})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--json", default=None, help="write all results as JSON here")
    args = parser.parse_args(argv)
    names = args.tasks.split(",") if args.tasks else wb.tasks()
    rows = []
    for i, name in enumerate(names, 1):
        task = wb.get_task(name)
        started = time.perf_counter()
        print(f"[{i}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        res = wb.evaluate(task, task.solution_candidate(), device=args.device)
        rows.append(res)
        print(f"  {res.summary()}  ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        if res.status != "ok":
            print(res.message, file=sys.stderr)
    print("\n## Built-in reference solutions (device: %s)\n" % (rows[0].device_name if rows else "?"))
    print("| task | size | status | candidate median | reference (eager) median | torch.compile median | speedup | SOL% | bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sol = f"{100 * r.sol_fraction:.1f}" if r.sol_fraction is not None else "n/a"
        speed = f"{r.speedup:.2f}x" if r.speedup is not None else "n/a"
        print(f"| {r.task} | {json.dumps(r.size)} | {r.status} {','.join(r.flags)} | {fmt_timing(r.timing)} | "
              f"{fmt_timing(r.reference_timing)} | {fmt_timing(r.compiled_reference_timing)} | {speed} | {sol} | {r.bound or 'n/a'} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.to_dict() for r in rows], fh, indent=1, default=str)
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
