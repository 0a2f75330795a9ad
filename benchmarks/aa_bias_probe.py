"""Where an A/A timing bias comes from: one KernelBench reference timed on the same memory four ways.

A reference judged against itself should come out at speedup 1.00, but the judge times the reference in its own
process and the candidate in a sandboxed runner that reaches the inputs through CUDA IPC. This probe separates the
suspects with the harness's own timing loop (`timed_loop.time_batch`, L2 flushed before each call):

1. the judge's process, inputs in ordinary torch memory;
2. the judge's process, inputs in a shared slab (the judge's driver allocation, as the timing pool holds them);
3. a plain child process (no sandbox), inputs in its own torch memory;
4. the same child, inputs read through the CUDA IPC mapping of the judge's slab (as a runner reads them);

then the full evaluation of the reference against itself, with each side's median and how timing decided (the
clock basis, the harness fits, the clock check). Medians in ms, and each way's ratio to way 1; a way far from 1.0 is
where the bias lives.

`--alternate ROUNDS` runs an evaluation's rounds without the evaluation: the judge times a batch on the slab, then a
child times the same order through IPC, round after round, for `--children` fresh children; each side's median per
input set tells a per-process bias (one side slow on every set) from a per-placement one. The child can be made
more like a runner step by step: new contents and the child stopped around the judge's batch (`--refresh
--freeze`), the runner's syscall filter (`--filter`), a kernel trace before timing as coverage makes one (`--trace
cupti|torch`), forked from a process that imported the runner's modules (`--fork`). `--runner bare|checked` times
with a real runner (fork server, sandbox, loader) and no other stage, or after the correctness rounds.

    PYTHONPATH=. python benchmarks/aa_bias_probe.py tests/kernelbench/level1/11_Sum_middle_dim_keepdim.py [--reps 40] [--no-eval]
    PYTHONPATH=. python benchmarks/aa_bias_probe.py PROBLEM --alternate 10 --children 3 [--refresh --freeze] [--fork]
    PYTHONPATH=. python benchmarks/aa_bias_probe.py PROBLEM --runner bare|checked [--device cpu]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from workbench.eval.wire import timed_loop
from workbench.eval.wire.runner_messages import TensorRef
from workbench.eval.wire.shared_memory import Arena, _cuda_bytes, driver, view


def _problem(path: str):
    """The problem's model and inputs as an evaluation makes them: under the task's precision policy (the judge and
    every runner apply it: without it this process ran cuDNN's TF32 convolutions where a runner, which applies the
    policy, ran IEEE ones, so `--runner` compared different kernels), in eval mode as `build_reference` leaves it."""
    import workbench as wb
    from workbench.tasks import precision

    precision.apply(wb.load_kernelbench(path).precision)
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


def _shared_sets(inputs: list, sets: int) -> tuple[Arena, list, list]:
    """`sets` copies of the inputs in one shared slab, as the timing pool holds them: (arena, the sets, the tensor
    references a child opens them by)."""
    arena = Arena("cuda", transport="cuda-ipc")
    specs = [(tuple(x.shape), x.dtype) for x in inputs if isinstance(x, torch.Tensor)]
    shared = iter(arena.slab(specs * sets))
    slab_sets, refs = [], []
    for _ in range(sets):
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
    return arena, slab_sets, refs


def _open_sets(spec: dict, inputs: list) -> tuple[int, list]:
    """A child's view of the judge's slab through CUDA IPC: (its address here, the input sets)."""
    drv = driver()
    drv.ensure_context(0)
    ptr = drv.open(spec["handle"])
    raw = _cuda_bytes(ptr, spec["nbytes"], 0)[: spec["nbytes"]]
    sets = [[view(raw, TensorRef(**{**r, "shape": tuple(r["shape"]), "stride": tuple(r["stride"])})) if r else x
             for r, x in zip(refs, inputs, strict=True)] for refs in spec["refs"]]
    return ptr, sets


def child(path: str, refs_json: str, reps: int) -> None:
    """Ways 3 and 4, in a process of its own; prints one JSON line."""
    model, inputs = _problem(path)
    own = _median_ms(model, [inputs], reps)
    spec = json.loads(refs_json)
    ptr, sets = _open_sets(spec, inputs)
    ipc = _median_ms(model, sets, reps)
    print(json.dumps({"child_own": own, f"child_ipc_{len(sets)}sets": ipc}), flush=True)


def alternate_child(path: str, refs_json: str) -> None:
    """The runner's side of `--alternate`: maps the slab through CUDA IPC, then times one batch per line of stdin
    (a JSON order) and answers each with the stream ms per call."""
    spec = json.loads(refs_json)
    if spec.get("fork"):  # as a runner starts: forked (in a new session) from a process that imported its modules
        import gc
        import os

        import triton  # noqa: F401

        import workbench.eval.runner.main  # noqa: F401
        from workbench.eval.runner import loading  # noqa: F401

        gc.freeze()
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
        os.setsid()
    model, inputs = _problem(path)
    ptr, sets = _open_sets(spec, inputs)
    del inputs
    torch.cuda.empty_cache()
    if spec.get("trace") == "cupti":  # the coverage stage's kernel trace of one call, before any timing
        from workbench.eval.runner.kernel_trace import KernelTracer

        with torch.no_grad():
            KernelTracer().trace(lambda: model(*sets[0]), torch.cuda.synchronize)
    elif spec.get("trace") == "torch":  # the same through the torch profiler (the runner's fallback)
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(*sets[0])
            torch.cuda.synchronize()
        prof.events()
    if spec.get("filter"):  # the runner's syscall filter, as confinement installs it
        from workbench.sandbox import syscall_filter

        refused = syscall_filter.install()
        if refused:
            print(refused, file=sys.stderr)
    ssb = next((line.split(":", 1)[1].strip() for line in open("/proc/self/status")
                if line.startswith("Speculation_Store_Bypass")), "")
    print(json.dumps({"ptr": ptr, "ssb": ssb}), flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        stream, _ = timed_loop.time_batch(lambda xs: model(*xs), sets, order, device="cuda")
        print(json.dumps(stream), flush=True)


def alternate(path: str, sets: int, rounds: int, children: int, refresh: bool, freeze: bool,
              trace: str = "", filter_: bool = False, fork: bool = False) -> dict:
    """The evaluation's rounds without the evaluation: the judge times a batch on the slab, then a child times the
    same order through IPC, `rounds` times, for `children` fresh children; per child, each side's median per input
    set. Tells a per-process bias (one side slow on every set) from a per-placement one (one set slow on one side)."""
    import random
    import signal

    model, inputs = _problem(path)
    arena, slab_sets, refs = _shared_sets(inputs, sets)
    del inputs
    torch.cuda.empty_cache()
    buf = next(iter(arena._buffers.values()))
    spec = json.dumps({"handle": buf.info.handle, "nbytes": buf.info.nbytes, "refs": refs, "trace": trace,
                       "filter": filter_, "fork": fork})
    out: dict = {"judge_ptr_mod_2m": buf.ptr % (2 << 20), "children": []}
    rng = random.Random(0)
    for _ in range(children):
        proc = subprocess.Popen([sys.executable, __file__, path, "--alternate-child", spec], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        hello = json.loads(proc.stdout.readline())
        child_ptr = hello["ptr"]
        per: dict[str, dict[int, list[float]]] = {"judge": {}, "child": {}}
        for _ in range(rounds):
            order = list(range(sets))
            rng.shuffle(order)
            if freeze:
                proc.send_signal(signal.SIGSTOP)
            if refresh:
                for one in slab_sets:
                    for t in one:
                        if isinstance(t, torch.Tensor) and t.is_floating_point():
                            t.copy_(torch.rand_like(t))
                torch.cuda.synchronize()
            stream, _ = timed_loop.time_batch(lambda xs: model(*xs), slab_sets, order, device="cuda")
            if freeze:
                proc.send_signal(signal.SIGCONT)
            proc.stdin.write(json.dumps(order) + "\n")
            proc.stdin.flush()
            theirs = json.loads(proc.stdout.readline())
            for side, values in (("judge", stream), ("child", theirs)):
                for k, v in zip(order, values, strict=True):
                    per[side].setdefault(k, []).append(v)
        proc.stdin.close()
        proc.wait(timeout=60)
        out["children"].append({"child_ptr_mod_2m": child_ptr % (2 << 20), "ssb": hello["ssb"], **{
            f"{side}_set{k}": round(statistics.median(v), 4) for side in per for k, v in sorted(per[side].items())}})
    arena.close()
    return out


def runner_rounds(path: str, device: str, check: bool, keep_cache: bool = False, pin: bool = False) -> dict:
    """The evaluation's timing with a real runner (fork server, sandbox, the candidate loaded as the evaluation loads
    it) but none of the stages an evaluation runs before timing, or with its correctness rounds first (`check`):
    tells a bias that comes with the runner from one that the earlier stages leave behind."""
    import tempfile

    import workbench as wb
    from workbench.eval.judge.correctness.check import run_correctness
    from workbench.eval.judge.reference.rounds import build_reference
    from workbench.eval.judge.runners.process import ForkServer, RunnerProcess
    from workbench.eval.judge.runners.session import CandidateSession
    from workbench.eval.judge.timing import stage as timing_stage
    from workbench.eval.judge.timing.pair import PairTimer, ReferenceSide, stopping_rule
    from workbench.tasks.kernelbench import reference_as_candidate
    from workbench.tasks.task import LoadedReference

    if not device.startswith("cuda"):
        timed_loop.cpu_timing_threads()  # as the judge's main does: one intra-op thread on each side
    task = wb.load_kernelbench(path)
    from workbench.tasks import precision

    precision.apply(task.precision)  # as the judge does around a whole evaluation (and the runner at load)
    size = task.size(None, device)
    ref = LoadedReference(task, tempfile.mkdtemp(prefix="kwb_probe_"))
    model = build_reference(ref, size, device, 0)
    server = ForkServer(device)
    try:
        with RunnerProcess.start(server, device) as runner:
            session = CandidateSession(runner, device, 300.0)
            plan, _ = timing_stage.prepare(session, ref, model, size, 0, device, 300.0, interpreted=False)
            session.load(reference_as_candidate(task).source, "torch", "ModelNew", task.precision.to_spec(), 300.0)
            if check:
                session.lend_pool(plan.pool)
                run_correctness(ref, session, device=device, sizes=task.check_sizes(device)[:3], seed=0,
                                tolerance=task.tolerance)
            remote = session.model(model, ref.init_inputs(size, 0), 0, {**ref.defaults, **size})
            clock = "cuda-events" if device.startswith("cuda") else "wall"
            emptied = _count_empty_cache(keep_cache)
            # The judge's timing thread and the runner on one core (`timing_placement.OneCore`, read per timing).
            os.environ["KWB_TIMING_PIN"] = "1" if pin else "0"
            outcome = PairTimer(session, remote.model_id, ReferenceSide(model, None, task.tolerance, 0.0), plan.pool,
                                plan.calibration, stopping_rule(device, False, None), device, clock,
                                seeded=plan.seeded).run()
            kernels = {"runner": session.profile(remote.model_id, plan.pool.sets[0]),
                       "judge": _judge_kernels(model, plan.pool.sets[0])} if device.startswith("cuda") else {}
            session.close()
    finally:
        server.close()
    return {"reference": round(outcome.reference.median_ms, 4), "candidate": round(outcome.candidate.median_ms, 4),
            "speedup": round(outcome.reference.median_ms / outcome.candidate.median_ms, 3),
            "basis": outcome.protocol.get("timing_basis"), "batches": outcome.protocol.get("timed_batches"),
            "calls": outcome.protocol.get("calls_per_batch"), "findings": [f.flag for f in outcome.findings],
            "sandbox": runner.sandbox, "judge_empty_cache": emptied[0],
            "kernels_us": {side: {name[:60]: round(us, 1) for name, us in k.items()} for side, k in kernels.items()}}


def _count_empty_cache(keep: bool) -> list[int]:
    """Counts the judge's `torch.cuda.empty_cache` calls from here on; with `keep` the timing rounds' own
    `release_if_short` does nothing (the cache stays, no memory goes back to the driver between the two sides)."""
    from workbench.eval.judge.timing import pair as timing

    count = [0]
    real = torch.cuda.empty_cache

    def counted() -> None:
        count[0] += 1
        real()

    torch.cuda.empty_cache = counted
    if keep:
        timing.release_if_short = lambda device: False
    return count


def _judge_kernels(model, inputs: list) -> dict[str, float]:
    """{kernel: us} of one reference call in the judge, from the torch profiler read as the runner reads it: set
    beside the runner's own trace, it tells a slower kernel (placement, a different launch) from idle time inside
    the timed window."""
    from torch.profiler import ProfilerActivity, profile

    from workbench.eval.runner.kernel_trace import profiler_kernels

    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
    return profiler_kernels(prof.events())


def _evaluate(path: str, compile_reference: bool = True) -> dict:
    import workbench as wb
    from workbench.tasks.kernelbench import reference_as_candidate

    task = wb.load_kernelbench(path)
    res = wb.evaluate(task, reference_as_candidate(task), device="cuda", timeout=300,
                      compile_reference=compile_reference)
    ways: dict = {}
    if res.timing and res.reference_timing:
        ways["eval_reference"] = res.reference_timing.median_ms
        ways["eval_candidate"] = res.timing.median_ms
    ways["eval_speedup"] = res.speedup
    ways["eval_status"] = res.status
    ways["sandbox"] = getattr(res, "sandbox", None)
    tp = res.protocol.get("timing", res.protocol)
    for key in ("kernel_tracer", "timing_basis", "calls_per_batch", "timed_batches", "clock_check", "harness", "judge_harness"):
        if key in tp:
            ways[key] = tp[key]
    if res.telemetry:
        ways["telemetry"] = {k: v for k, v in res.telemetry.items() if not isinstance(v, (list, dict))}
    if res.judge_clock_timing:
        ways["judge_clock_ms"] = res.judge_clock_timing.median_ms
    return ways


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="+", help="KernelBench-format problem files")
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--sets", type=int, default=1, help="input sets in the shared slab, called in rotation")
    parser.add_argument("--no-eval", action="store_true", help="skip the full evaluation")
    parser.add_argument("--only-eval", action="store_true", help="only the full evaluation (ways 1-4 skipped)")
    parser.add_argument("--alternate", type=int, default=0, metavar="ROUNDS",
                        help="judge and child take turns on the slab for ROUNDS rounds (no evaluation)")
    parser.add_argument("--children", type=int, default=4, help="fresh children with --alternate")
    parser.add_argument("--refresh", action="store_true", help="new contents before each round (--alternate)")
    parser.add_argument("--freeze", action="store_true", help="child stopped while the judge times (--alternate)")
    parser.add_argument("--trace", choices=["", "cupti", "torch"], default="",
                        help="the child traces one call's kernels first, as coverage does (--alternate)")
    parser.add_argument("--filter", action="store_true",
                        help="the child installs the runner's syscall filter first (--alternate)")
    parser.add_argument("--runner", choices=["", "bare", "checked"], default="",
                        help="time with a real runner and no other stage (bare), or after the correctness rounds")
    parser.add_argument("--device", default="cuda", help="device of --runner")
    parser.add_argument("--pin", action="store_true",
                        help="with --runner: the judge's timing thread and the runner's threads on one core, as "
                             "evaluations time by default (without it the probe times unpinned)")
    parser.add_argument("--keep-cache", action="store_true",
                        help="with --runner: the judge keeps its freed GPU memory cached between the two sides")
    parser.add_argument("--fork", action="store_true", help="the child forks as the runner's fork server does")
    parser.add_argument("--no-compiled", action="store_true", help="evaluate without timing torch.compile")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--alternate-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.problem[0], args.child, args.reps)
        return 0
    if args.alternate_child:
        alternate_child(args.problem[0], args.alternate_child)
        return 0
    if args.runner:
        for path in args.problem:
            print(f"{Path(path).stem} ({args.runner}): {runner_rounds(path, args.device, args.runner == 'checked', args.keep_cache, args.pin)}",
                  flush=True)
        return 0
    if args.alternate:
        for path in args.problem:
            got = alternate(path, max(args.sets, 2), args.alternate, args.children, args.refresh, args.freeze,
                            args.trace, args.filter, args.fork)
            print(f"{Path(path).stem}: judge ptr mod 2 MiB {got['judge_ptr_mod_2m']}", flush=True)
            for row in got["children"]:
                print("  " + "  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        return 0
    for path in args.problem:
        if args.only_eval:
            print(f"{Path(path).stem}: {_evaluate(path, not args.no_compiled)}", flush=True)
            continue
        model, inputs = _problem(path)
        ways = {"judge_own": _median_ms(model, [inputs], args.reps)}
        arena, slab_sets, refs = _shared_sets(inputs, args.sets)
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
            ways.update(_evaluate(path, not args.no_compiled))
        base = ways["judge_own"]
        line = "  ".join(f"{k} {v:.4g}" + (f" ({v / base:.3f}x)" if k.endswith(("own", "sets", "reference",
                                                                                 "candidate")) else "")
                         if isinstance(v, float) else f"{k} {v}" for k, v in ways.items())
        print(f"{Path(path).stem}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
