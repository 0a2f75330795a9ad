"""Candidates per minute: 16 variants (num_warps x num_stages) of a built-in Triton solution on one task, evaluated back
to back, first as fresh sources (never compiled before: each carries this run's nonce), then the same 16 again
(their kernels in the Triton cache, the reference's rounds in the judge's cache).

    python benchmarks/eval_throughput.py                       # GPU: softmax at its GPU preset
    python benchmarks/eval_throughput.py --device cpu --task softmax

Prints one line per evaluation (status, time, stage seconds), then candidates per minute for each pass, the
median stage seconds, and the targets (30/min fresh, 60/min repeated on one H100).
"""

from __future__ import annotations

import argparse
import itertools
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import workbench as wb  # noqa: E402
from workbench.study.sweep import with_knobs  # noqa: E402

#: Launch options of the solution's kernels (every variant correct at any size: the row length decides the block).
GRID = {"num_warps": [2, 4, 8, 16], "num_stages": [1, 2, 3, 4]}
TARGETS = {"fresh": 30.0, "repeated": 60.0}


def variants(task: wb.Task, nonce: str) -> list[wb.Candidate]:
    template = task.solution_candidate().source
    out = []
    for warps, stages in itertools.product(GRID["num_warps"], GRID["num_stages"]):
        source = f"# throughput run {nonce}\n" + with_knobs(template, num_warps=warps, num_stages=stages)
        out.append(wb.Candidate(source=source, language="triton", name=f"num_warps={warps},num_stages={stages}"))
    return out


def run_pass(label: str, task: wb.Task, cands: list[wb.Candidate], device: str) -> tuple[float, list[wb.Result]]:
    started = time.perf_counter()
    results = []
    for i, cand in enumerate(cands, 1):
        t0 = time.perf_counter()
        res = wb.evaluate(task, cand, device=device)
        results.append(res)
        t = f"{res.timing.median_ms:.4f} ms" if res.timing else "-"
        print(f"[{label} {i}/{len(cands)}] {cand.name:24s} {res.status:10s} {t:>12s} {time.perf_counter() - t0:5.2f} s "
              f"{res.stage_seconds} {','.join(res.flags)}", flush=True)
    return len(cands) / ((time.perf_counter() - started) / 60.0), results


def median_stages(results: list[wb.Result]) -> dict[str, float]:
    names = sorted({k for r in results for k in r.stage_seconds})
    return {k: round(statistics.median(r.stage_seconds.get(k, 0.0) for r in results), 3) for k in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="softmax")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    task = wb.get_task(args.task)
    warm = wb.evaluate(task, task.solution_candidate(), device=args.device)  # judge start-up, first-use costs
    print(f"warm-up: {warm.status} {warm.stage_seconds}", flush=True)
    cands = variants(task, secrets.token_hex(4))
    fresh, fresh_results = run_pass("fresh", task, cands, args.device)
    repeated, repeated_results = run_pass("repeated", task, cands, args.device)
    print(f"\nmedian stage seconds, fresh:    {median_stages(fresh_results)}")
    print(f"median stage seconds, repeated: {median_stages(repeated_results)}")
    bad = [r for r in fresh_results + repeated_results if r.status not in ("ok", "rejected", "incorrect")]
    for name, rate in (("fresh", fresh), ("repeated", repeated)):
        print(f"{name:9s} {rate:6.1f} candidates/min (target {TARGETS[name]:.0f} on one H100)")
    if bad:
        print(f"{len(bad)} evaluations failed to run: {sorted({r.status for r in bad})}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
