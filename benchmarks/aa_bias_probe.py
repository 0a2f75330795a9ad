"""Where an A/A timing bias comes from: one KernelBench reference timed on the same memory four ways.

A reference judged against itself should come out at speedup 1.00, but the judge times the reference in its own
process and the candidate in a sandboxed runner that reaches the inputs through CUDA IPC. This probe separates the
suspects with the harness's own timing loop (`timed_loop.time_batch`, L2 flushed before each call):

1. the judge's process, inputs in ordinary torch memory;
2. the judge's process, inputs in a shared slab (the judge's driver allocation, as the timing pool holds them);
3. a plain child process (no sandbox), inputs in its own torch memory;
4. the same child, inputs read through the CUDA IPC mapping of the judge's slab (as a runner reads them);

then the full evaluation of the reference against itself, with each side's median. Medians in ms, and each way's
ratio to way 1; a way far from 1.0 is where the bias lives.

    PYTHONPATH=. python benchmarks/aa_bias_probe.py tests/kernelbench/level1/11_Sum_middle_dim_keepdim.py [--reps 40] [--no-eval]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from workbench.eval.wire import timed_loop
from workbench.eval.wire.runner_messages import TensorRef
from workbench.eval.wire.shared_memory import Arena, _cuda_bytes, driver, view


def _problem(path: str):
    spec = importlib.util.spec_from_file_location("probe_problem", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    return model, inputs


def _median_ms(model, sets: list, reps: int) -> float:
    """Median ms per call over `reps` calls, rotating through the input sets (as a timed batch does)."""
    order = [i % len(sets) for i in range(reps)]
    stream, _ = timed_loop.time_batch(lambda xs: model(*xs), sets, order, device="cuda", warmup=3)
    return statistics.median(stream)


def child(path: str, refs_json: str, reps: int) -> None:
    """Ways 3 and 4, in a process of its own; prints one JSON line."""
    model, inputs = _problem(path)
    own = _median_ms(model, [inputs], reps)
    spec = json.loads(refs_json)
    drv = driver()
    drv.ensure_context(0)
    ptr = drv.open(spec["handle"])
    raw = _cuda_bytes(ptr, spec["nbytes"], 0)[: spec["nbytes"]]
    sets = [[view(raw, TensorRef(**{**r, "shape": tuple(r["shape"]), "stride": tuple(r["stride"])})) if r else x
             for r, x in zip(refs, inputs, strict=True)] for refs in spec["refs"]]
    ipc = _median_ms(model, sets, reps)
    print(json.dumps({"child_own": own, f"child_ipc_{len(sets)}sets": ipc}), flush=True)


def _evaluate(path: str) -> dict:
    import workbench as wb
    from workbench.tasks.kernelbench import reference_as_candidate

    task = wb.load_kernelbench(path)
    res = wb.evaluate(task, reference_as_candidate(task), device="cuda", timeout=300)
    ways: dict = {}
    if res.timing and res.reference_timing:
        ways["eval_reference"] = res.reference_timing.median_ms
        ways["eval_candidate"] = res.timing.median_ms
    ways["eval_speedup"] = res.speedup
    ways["eval_status"] = res.status
    ways["sandbox"] = getattr(res, "sandbox", None)
    return ways


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="+", help="KernelBench-format problem files")
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--sets", type=int, default=1, help="input sets in the shared slab, called in rotation")
    parser.add_argument("--no-eval", action="store_true", help="skip the full evaluation")
    parser.add_argument("--only-eval", action="store_true", help="only the full evaluation (ways 1-4 skipped)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.problem[0], args.child, args.reps)
        return 0
    for path in args.problem:
        if args.only_eval:
            print(f"{Path(path).stem}: {_evaluate(path)}", flush=True)
            continue
        model, inputs = _problem(path)
        ways = {"judge_own": _median_ms(model, [inputs], args.reps)}
        arena = Arena("cuda", transport="cuda-ipc")
        specs = [(tuple(x.shape), x.dtype) for x in inputs if isinstance(x, torch.Tensor)]
        shared = iter(arena.slab(specs * args.sets))
        slab_sets, refs = [], []
        for _ in range(args.sets):
            one, one_refs = [], []
            for x in inputs:
                if isinstance(x, torch.Tensor):
                    v, ref = next(shared)
                    v.copy_(x)
                    one.append(v)
                    one_refs.append(dataclasses.asdict(ref))
                else:
                    one.append(x)
                    one_refs.append(None)
            slab_sets.append(one)
            refs.append(one_refs)
        ways[f"judge_slab_{args.sets}sets"] = _median_ms(model, slab_sets, args.reps)
        buf = next(iter(arena._buffers.values()))
        spec = json.dumps({"handle": buf.info.handle, "nbytes": buf.info.nbytes, "refs": refs})
        torch.cuda.synchronize()
        out = subprocess.run([sys.executable, __file__, path, "--reps", str(args.reps), "--sets", str(args.sets),
                              "--child", spec],
                             capture_output=True, text=True, timeout=300)
        try:
            ways.update(json.loads(out.stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError):
            print(f"child failed: {out.stderr[-1500:]}")
        del slab_sets
        arena.close()
        del model, inputs
        torch.cuda.empty_cache()
        if not args.no_eval:
            ways.update(_evaluate(path))
        base = ways["judge_own"]
        line = "  ".join(f"{k} {v:.4g}" + (f" ({v / base:.3f}x)" if k.endswith(("own", "sets", "reference",
                                                                                 "candidate")) else "")
                         if isinstance(v, float) else f"{k} {v}" for k, v in ways.items())
        print(f"{Path(path).stem}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
