"""What one correctness call costs the runner beyond the candidate's own work, step by step: the memory poisoning
before the call (garbage collection, allocator cache emptied, free blocks listed and refilled), the launch tracker,
the record of what ran, and the cache emptied after. Runs in one process set up like a runner (torch and triton
imported, the collector frozen, the built-in softmax solution loaded and compiled).

    PYTHONPATH=. python benchmarks/runner_call_cost.py --device cuda [--reps 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)

    import tempfile

    import torch

    import workbench as wb
    from workbench.eval.runner import launches, op_record, poison
    from workbench.eval.runner.loading import load_candidate

    gc.freeze()
    task = wb.get_task("softmax")
    module, cls = load_candidate({"source": task.solution_candidate().source, "language": "triton"}, args.device,
                                 tempfile.mkdtemp())
    model = cls().to(args.device)
    x = torch.randn(*((4096, 4096) if args.device.startswith("cuda") else (64, 256)), device=args.device)
    out = model(x)
    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    p = poison.Poison(args.device)
    like = [x, out]

    def call_only() -> None:
        model(x)
        sync()

    def tracked() -> None:
        with launches.track_launches(module) as log, torch.no_grad():
            log.observe(model(x))
        sync()

    def recorded() -> None:
        with op_record.recording(module, True) as rec, torch.no_grad():
            model(x)
        rec.report()
        sync()

    def empty() -> None:
        torch.cuda.empty_cache() if cuda else None

    steps = {
        "candidate call alone": call_only,
        "gc.collect": gc.collect,
        "poison.prepare (whole)": lambda: p.prepare(like),
        "launch tracker + call": tracked,
        "op record + call": recorded,
        "empty_cache": empty,
    }
    if cuda:
        idx = torch.cuda.current_device()
        steps["memory_snapshot"] = torch.cuda.memory_snapshot
        steps["free_fragments"] = lambda: poison.free_fragments(idx)
    print(f"{len(gc.get_objects())} objects tracked by the collector after freeze")
    for name, fn in steps.items():
        print(f"{name:28s} {_ms(fn, args.reps):8.2f} ms (median of {args.reps})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
