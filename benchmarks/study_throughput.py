"""Study throughput with 1 vs 2 Dask workers: the same grid of block-size points run twice, timed end to end.

Each point is one papermill execution of studies/block_size_sweep.ipynb with a single config (kernel start,
Triton compile, checks and timing), so the ratio shows how much the runner overlaps that work.
    PYTHONPATH=. python benchmarks/study_throughput.py --out artifacts [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from workbench.study.run import run_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="artifacts")
    parser.add_argument("--device", default=None)
    parser.add_argument("--points", type=int, default=6)
    args = parser.parse_args(argv)
    notebook = Path(__file__).resolve().parents[1] / "studies" / "block_size_sweep.ipynb"
    blocks = [[64], [128], [256], [512], [1024], [2048], [4096], [32]][: args.points]
    grid = {"block_sizes": blocks}
    base = {"num_warps": [4]}
    if args.device:
        base["device"] = args.device
    rows = []
    for workers in (1, 2):
        started = time.perf_counter()
        run = run_study(notebook, base, grid, store_path=f"{args.out}/throughput.db", out_dir=f"{args.out}/throughput",
                        cluster=f"local:{workers}", progress=False)
        seconds = time.perf_counter() - started
        done = sum(o.status == "done" for o in run.outcomes)
        rows.append((workers, done, seconds))
        print(f"{workers} worker(s): {done}/{len(run.outcomes)} points in {seconds:.1f} s "
              f"-> {60 * done / seconds:.1f} points/min", flush=True)
        for o in run.failed:
            print("failed:", o.error[-800:], file=sys.stderr)
    (w1, d1, s1), (w2, d2, s2) = rows
    print(f"\nthroughput ratio 2 workers / 1 worker: {(d2 / s2) / (d1 / s1):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
