"""Workbench kernel time vs Nsight Compute's gpu__time_duration for softmax, layernorm and matmul.

Target: within 3% for kernels >= 20 us. The workbench times with CUDA events around each call (L2 flushed,
device synchronized before the end event); ncu reports the kernel's own duration (clocks not locked).
    PYTHONPATH=. python benchmarks/roofline_ncu.py [--tasks softmax,layernorm,matmul]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch

    from roofline import ncu

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default="softmax,layernorm,matmul")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or not ncu.available():
        print("needs a CUDA GPU and Nsight Compute (ncu) on PATH")
        return 0
    import workbench as wb
    from workbench.guards import _candidate_kernel_names
    from workbench.languages import load_candidate

    rows = []
    target = str(Path(__file__).with_name("_ncu_target.py"))
    for name in args.tasks.split(","):
        task = wb.get_task(name)
        res = wb.evaluate(task, task.solution_candidate(), device="cuda", compile_reference=False)
        module, _ = load_candidate(task.solution_candidate().to_spec(), "cuda")
        kernel_names = _candidate_kernel_names(module, "")
        regex = "|".join(sorted(kernel_names))
        metrics = ncu.profile_script([target, name, "5"], kernel_regex=regex)
        per_call = [k.seconds * 1e3 for k in metrics if k.seconds]
        # Launches per forward: kernels seen / calls; sum per forward then take the median.
        launches = max(1, len(per_call) // 5)
        sums = [sum(per_call[i:i + launches]) for i in range(0, len(per_call) - launches + 1, launches)]
        ncu_ms = statistics.median(sums) if sums else float("nan")
        ours = res.timing.median_ms if res.timing else float("nan")
        dram = statistics.median([k.dram_bytes for k in metrics if k.dram_bytes]) if metrics else float("nan")
        rows.append((name, res.status, ours, ncu_ms, dram, res.bytes))
    print("| task | status | workbench median (ms) | ncu gpu__time_duration (ms) | ratio | ncu dram bytes | analytic bytes |")
    print("|---|---|---|---|---|---|---|")
    for name, status, ours, theirs, dram, analytic in rows:
        print(f"| {name} | {status} | {ours:.4f} | {theirs:.4f} | {ours / theirs:.3f} | {dram:.3e} | {analytic or 0:.3e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
