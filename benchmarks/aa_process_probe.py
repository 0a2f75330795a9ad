"""Whether an A/A timing bias belongs to a runner's history or to the runner process itself: one reference timed in
three runners on one timing pool, round after round.

A reference judged against itself is timed in two runners: the candidate's (which imported it, ran the correctness
rounds and then timing) and the reference's own (which only loaded it and mapped the pool). When identical code
reads 2% apart, either those earlier stages left the candidate's process slower or faster (its allocator, its
libraries' caches: a history the reference's runner could be given too), or any two runner processes differ by
that much (where code and data landed: then only more processes or a wider band help). Here three runners time the
same reference on the same pool, taking turns in rotating order with the pool written again before each batch (as
`timing.PairTimer` does), all pinned to one core (`timing_placement.OneCore`):

  fresh-a, fresh-b   loaded the reference and built it, nothing else (as the reference's runner); with
                     `--copy-b` fresh-b copies every output into a buffer of its own, whatever its size;
  checked            loaded it, ran the correctness rounds on it first (as the candidate's runner).

Per pair, the paired speedup (the median over rounds of the per-round ratio) with its bootstrap CI and verdict, as
the judge computes them (`verdict.speedup`). fresh-a/fresh-b far from 1 means processes differ by themselves;
fresh/checked far from 1 while fresh-a/fresh-b is near it means the history does. `--trials` repeats with new runners.

    PYTHONPATH=. python benchmarks/aa_process_probe.py PROBLEM [PROBLEM ...] [--rounds 40] [--trials 2]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

#: Seconds of calls a timed batch aims at (as the judge's timing does).
TARGET_BATCH_S = 0.1


def _pin(runners: list[Any]) -> None:
    """This thread and every thread of the runners on the last core (`timing_placement.OneCore`)."""
    core = {max(os.sched_getaffinity(0))}
    os.sched_setaffinity(0, core)
    for runner in runners:
        for pid in runner.members():
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    os.sched_setaffinity(int(tid), core)
                except OSError:
                    pass


@contextlib.contextmanager
def _scratch_forced(forced: bool) -> Iterator[None]:
    """With `forced`, a reference runner launched inside copies every output into a scratch buffer of its own even
    when the output is larger than the judge mirrors (`reference_runner._scratch_slots`), as a candidate's runner
    copies into its slot."""
    from workbench.eval.judge.timing import batches as timing_batches

    if not forced:
        yield
        return
    real = timing_batches.copy_out_mirrored
    timing_batches.copy_out_mirrored = lambda pool: pool.out_like is not None
    try:
        yield
    finally:
        timing_batches.copy_out_mirrored = real


def trial(path: str, rounds: int, device: str, seed: int, copy_b: bool = False,
          check: bool = True) -> dict[str, Any]:
    """One trial: three new runners on one new pool (module doc); each pair's speedup, CI and verdict."""
    import workbench as wb
    from workbench.eval.judge.context import probe_transport
    from workbench.eval.judge.correctness.check import run_correctness
    from workbench.eval.judge.reference.rounds import build_reference
    from workbench.eval.judge.reference.runner import ReferenceRunner
    from workbench.eval.judge.runners.libraries import libraries_for
    from workbench.eval.judge.runners.process import ForkServer, Limits, RunnerProcess
    from workbench.eval.judge.runners.session import CandidateSession
    from workbench.eval.judge.timing import stage as timing_stage
    from workbench.eval.judge.verdict import speedup as compare
    from workbench.tasks import precision
    from workbench.tasks.kernelbench import reference_as_candidate
    from workbench.tasks.task import LoadedReference

    task = wb.load_kernelbench(path)
    precision.apply(task.precision)
    size = task.size(None, device)
    ref = LoadedReference(task, tempfile.mkdtemp(prefix="kwb_probe_"))
    model = build_reference(ref, size, device, 0)
    source = reference_as_candidate(task).source
    spec = task.precision.to_spec()
    init, sizes = ref.init_inputs(size, 0), {**ref.defaults, **size}
    server = ForkServer(device)
    transport, share_ipc, _ = probe_transport(server, device)
    ctx = SimpleNamespace(fork_server=server, share_ipc=share_ipc, transport=transport)
    closing: list[Any] = []
    pool = None
    try:
        runner = RunnerProcess.start(server, device, share_ipc=share_ipc, warm=libraries_for(device, source))
        checked = CandidateSession(runner, device, 300.0, transport)
        closing.append(checked)
        plan, _ = timing_stage.prepare(checked, ref, model, size, 0, device, 300.0, interpreted=False)
        pool = plan.pool
        checked.load(source, "torch", "ModelNew", spec, 300.0)
        checked.lend_pool(pool)
        started = time.perf_counter()
        if check:
            run_correctness(ref, checked, device=device, sizes=task.check_sizes(device)[:3], seed=0,
                            tolerance=task.tolerance)
        check_s = time.perf_counter() - started
        torch.cuda.empty_cache()  # the checks' float64 work: the other runners need the memory
        fresh = []
        for copies in (False, copy_b):
            with _scratch_forced(copies):
                r = ReferenceRunner.launch(ctx, device, Limits(), 300.0, pool, model, source, spec, init, 0, sizes)
            closing.append(r)
            fresh.append(r)
        remote = checked.model(model, init, 0, sizes)
        for r in fresh:
            r.ready()
        sides: dict[str, Any] = {
            "fresh-a": lambda order, seeds: fresh[0].time(order, seeds, 300.0)[0],
            "fresh-b": lambda order, seeds: fresh[1].time(order, seeds, 300.0)[0],
            "checked": lambda order, seeds: checked.time(remote.model_id, pool.pool_id, order, 300.0, seeds)[0]}
        _pin([checked.runner, fresh[0].session.runner, fresh[1].session.runner])
        rng = random.Random(seed)
        names = list(sides)
        per: dict[str, list[float]] = {name: [] for name in names}
        calls = 1
        for b in range(rounds + 2):
            order = list(range(min(calls, pool.n)))
            rng.shuffle(order)
            seeds = tuple(rng.randrange(1 << 62) for _ in order) if plan.seeded else ()
            contents = pool.refresh(rng, len(order))
            turn = names[b % 3:] + names[:b % 3]
            means = {}
            for name in turn:
                pool.refresh(None, seeds=contents)
                samples = sides[name](order, seeds)
                means[name] = sum(samples.stream_ms) / len(samples.stream_ms)
            if b == 0:  # the warm-up sizes the batches
                calls = max(1, math.ceil(TARGET_BATCH_S * 1e3 / max(min(means.values()), 1e-3)))
            if b >= 2:
                for name, v in means.items():
                    per[name].append(v)
        out: dict[str, Any] = {"problem": Path(path).name, "check_s": round(check_s, 2), "calls": min(calls, pool.n),
                               "median_ms": {n: round(sorted(v)[len(v) // 2], 4) for n, v in per.items()}}
        for a, b_ in (("fresh-a", "fresh-b"), ("fresh-a", "checked"), ("fresh-b", "checked")):
            s = compare(per[a], per[b_], paired=True)
            out[f"{a}/{b_}"] = f"{s.speedup:.3f} [{s.low:.3f}, {s.high:.3f}] {s.verdict}"
        return out
    finally:
        for item in closing:
            try:
                item.close()
            except Exception:  # noqa: BLE001 - a probe's cleanup
                pass
        if pool is not None:
            pool.free()
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", nargs="+", help="KernelBench-format problem files")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--trials", type=int, default=2, help="new runners and a new pool each time")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--copy-b", action="store_true",
                        help="fresh-b copies every output into a scratch buffer as the candidate's runner does")
    parser.add_argument("--no-check", action="store_true",
                        help="no correctness rounds in `checked` (it still commits into the pool's slots)")
    args = parser.parse_args(argv)
    for path in args.problem:
        for t in range(args.trials):
            try:
                got = trial(path, args.rounds, args.device, seed=t, copy_b=args.copy_b,
                            check=not args.no_check)
            except Exception as exc:  # noqa: BLE001 - one problem's failure is reported, the others still run
                got = {"problem": Path(path).name, "error": f"{type(exc).__name__}: {exc}"[:300]}
            print(got, flush=True)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
