"""Scale over the GPUs of one host: candidates per minute with every GPU against one, in one run.

    python benchmarks/scale.py --phase triton                       # fresh Triton variants of a built-in task
    python benchmarks/scale.py --phase kernelbench --sample 1:16    # KernelBench references as candidates
    python benchmarks/scale.py --phase study --points 8             # a study through Dask: N workers against 1
    python benchmarks/scale.py --phase memory --ids 1/94,1/96       # large problems, four in flight against alone
    python benchmarks/scale.py --phase triton,kernelbench,study     # several phases, one after another

Each throughput phase runs the same work with every visible GPU first, then with GPU 0 alone (the first run pays
for cold file caches, so the ratio errs low), with fresh judges each time; fresh Triton variants carry a new nonce,
so none is in the compile cache. Judges are started and warmed before the clock starts. `memory` evaluates each
large problem's reference four at a time on GPU 0, then each alone, and lists any verdict that differs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import workbench as wb  # noqa: E402
from workbench.dispatch import pool  # noqa: E402
from workbench.dispatch.gpus import visible_count  # noqa: E402


def _fresh_judges(devices: list[str], warm: Callable[[], Any]) -> None:
    """End every judge, start this configuration's, and warm each (imports, CUDA context) before timing."""
    pool.shutdown_judges()
    n = pool.prestart("cuda", None, devices)
    with ThreadPoolExecutor(n) as ex:
        list(ex.map(lambda _: warm(), range(n)))


def _rate(label: str, jobs: Sequence[Callable[[], wb.Result]], slots: int,
          describe: Callable[[wb.Result], str] | None = None) -> tuple[float, list[wb.Result]]:
    """Candidates per minute over `jobs`, `slots` at a time; a line per result as it finishes (and `describe`'s)."""
    started = time.perf_counter()
    done: list[wb.Result] = []

    def one(job: Callable[[], wb.Result]) -> wb.Result:
        result = job()
        done.append(result)
        gpu = result.metadata.get("gpu", "-")
        print(f"  [{label} {len(done)}/{len(jobs)}] {result.task[:40]:40s} {result.candidate_name[:24]:24s} "
              f"{result.status:10s} {gpu:7s} {result.metadata.get('eval_seconds', 0):6.2f} s", flush=True)
        if describe is not None:
            print(f"      {describe(result)}", flush=True)
        return result

    with ThreadPoolExecutor(slots) as ex:
        results = list(ex.map(one, jobs))
    minutes = (time.perf_counter() - started) / 60.0
    return len(jobs) / minutes, results


def _compare(name: str, make_jobs: Callable[[str], list[Callable[[], wb.Result]]], warm: Callable[[], Any],
             every: list[str]) -> dict[str, Any]:
    """The same work with every GPU, then with GPU 0 alone; candidates per minute and the ratio."""
    row: dict[str, Any] = {"phase": name, "gpus": len(every)}
    for label, devices in (("all", every), ("one", every[:1])):
        _fresh_judges(devices, warm)
        slots = pool.judge_slots("cuda") * len(devices)
        rate, results = _rate(f"{name} {len(devices)} GPU", make_jobs(label), slots)
        per_gpu = {g: sum(r.metadata.get("gpu") == g for r in results) for g in devices}
        statuses = {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})}
        print(f"{name}: {len(devices)} GPU(s), {slots} judges: {rate:.1f} candidates/min; per GPU {per_gpu}; "
              f"{statuses}; median eval {statistics.median(r.metadata.get('eval_seconds', 0) for r in results):.2f} s",
              flush=True)
        row[label] = {"rate": round(rate, 2), "per_gpu": per_gpu, "statuses": statuses}
    row["ratio"] = round(row["all"]["rate"] / row["one"]["rate"], 3)
    print(f"== {name}: {len(every)} GPUs / 1 GPU = {row['ratio']:.2f}x", flush=True)
    return row


def phase_triton(args: argparse.Namespace, every: list[str]) -> dict[str, Any]:
    from eval_throughput import variants

    task = wb.get_task(args.task)

    def make_jobs(label: str) -> list[Callable[[], wb.Result]]:
        cands = (variants(task, secrets.token_hex(4)) + variants(task, secrets.token_hex(4)))[:args.count]
        devices = every if label == "all" else every[:1]
        return [partial(wb.evaluate, task, c, device="cuda", devices=devices) for c in cands]

    return _compare("triton", make_jobs, lambda: wb.evaluate(task, task.solution_candidate(), device="cuda"), every)


def _kernelbench_tasks(args: argparse.Namespace, spec: str) -> list[wb.Task]:
    from kernelbench_aa import only_ids, problems, sample

    levels = sorted({int(part.split(":")[0].split("/")[0]) for part in spec.split(",")})
    chosen = problems(args.problems, levels)
    picked = only_ids(chosen, spec) if "/" in spec else sample(chosen, spec, args.seed)
    return [wb.load_kernelbench(path) for _, path in picked]


def phase_kernelbench(args: argparse.Namespace, every: list[str]) -> dict[str, Any]:
    from workbench.tasks.kernelbench import reference_as_candidate

    tasks = _kernelbench_tasks(args, args.sample)
    print(f"kernelbench: {[t.name for t in tasks]}", flush=True)

    def make_jobs(label: str) -> list[Callable[[], wb.Result]]:
        devices = every if label == "all" else every[:1]
        return [partial(wb.evaluate, t, reference_as_candidate(t), device="cuda", devices=devices,
                        compile_reference=False) for t in tasks]

    warm_task = wb.get_task(args.task)
    return _compare("kernelbench", make_jobs,
                    lambda: wb.evaluate(warm_task, warm_task.solution_candidate(), device="cuda"), every)


def phase_study(args: argparse.Namespace, every: list[str]) -> dict[str, Any]:
    """The block-size study over Dask: a worker per GPU against one worker."""
    from workbench.study.run import run_study

    notebook = ROOT / "studies" / "block_size_sweep.ipynb"
    blocks = [[64], [128], [256], [512], [1024], [2048], [4096], [32], [16], [8192]][:args.points]
    row: dict[str, Any] = {"phase": "study", "gpus": len(every)}
    out = Path(args.out)
    for label, workers in (("all", len(every)), ("one", 1)):
        pool.shutdown_judges()
        started = time.perf_counter()
        run = run_study(notebook, {"num_warps": [4], "device": "cuda"}, {"block_sizes": blocks},
                        store_path=str(out / f"scale_study_{label}.db"), out_dir=str(out / f"scale_study_{label}"),
                        cluster=f"local:{workers}", progress=False)
        seconds = time.perf_counter() - started
        done = sum(o.status == "done" for o in run.outcomes)
        rate = 60 * done / seconds
        print(f"study: {workers} Dask worker(s): {done}/{len(run.outcomes)} points in {seconds:.1f} s -> "
              f"{rate:.1f} points/min", flush=True)
        for failed in run.failed:
            print(f"  failed point {failed.point.id}: {failed.error[:300]}", flush=True)
        row[label] = {"rate": round(rate, 2), "done": done, "seconds": round(seconds, 1)}
    row["ratio"] = round(row["all"]["rate"] / row["one"]["rate"], 3)
    print(f"== study: {len(every)} workers / 1 worker = {row['ratio']:.2f}x", flush=True)
    return row


def _memory_detail(r: wb.Result) -> str:
    """Where a large problem's seconds went, printed as it finishes (a run cut by its time limit still shows them)."""
    return (f"alone-retry={bool(r.protocol.get('gpu_alone'))} f64={r.protocol.get('float64_reference')} "
            f"booked GiB={r.protocol.get('memory_booked_gib')} waited s={r.protocol.get('memory_wait_s')} "
            f"judge GiB={r.protocol.get('judge_memory_gib')} stages={r.stage_seconds} {(r.message or '')[:160]}")


def phase_memory(args: argparse.Namespace, every: list[str]) -> dict[str, Any]:
    """Large problems on GPU 0: each reference as a candidate, `--repeat` copies `--in-flight` at once, then each
    problem alone; a verdict that differs is listed."""
    from workbench.tasks.kernelbench import reference_as_candidate

    tasks = _kernelbench_tasks(args, args.ids)
    statuses: dict[str, dict[str, list[str]]] = {}
    for label, in_flight, copies in (("together", args.in_flight, args.repeat), ("alone", 1, 1)):
        pool.shutdown_judges()
        os.environ["KWB_JUDGES"] = str(in_flight)
        started = time.perf_counter()
        jobs = [partial(wb.evaluate, t, reference_as_candidate(t), device="cuda", devices=every[:1],
                        compile_reference=False) for t in tasks for _ in range(copies)]
        _, results = _rate(f"memory {label}", jobs, in_flight, _memory_detail)
        print(f"memory: {label} ({in_flight} in flight): {len(results)} evaluations in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
        statuses[label] = {t.name: [r.status for r in results if r.task == t.name] for t in tasks}
    os.environ.pop("KWB_JUDGES", None)
    differ = [name for name, alone in statuses["alone"].items() if set(statuses["together"][name]) != set(alone)]
    print(f"== memory: {len(differ)} problem(s) with a verdict that differs between together and alone: {differ}",
          flush=True)
    return {"phase": "memory", "statuses": statuses, "differ": differ}


PHASES = {"triton": phase_triton, "kernelbench": phase_kernelbench, "study": phase_study, "memory": phase_memory}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase", default="triton", help=f"comma-separated: {', '.join(PHASES)}")
    parser.add_argument("--task", default="softmax", help="built-in task of the Triton phase")
    parser.add_argument("--count", type=int, default=32, help="Triton variants per configuration")
    parser.add_argument("--problems", default=str(ROOT / ".kernelbench" / "KernelBench"))
    parser.add_argument("--sample", default="1:16", help="KernelBench sample (level:count,...) or ids (1/19,...)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--points", type=int, default=8, help="study points")
    parser.add_argument("--ids", default="1/94,1/96", help="large KernelBench problems of the memory phase")
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="candidates per large problem")
    parser.add_argument("--out", default="artifacts")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    every = [f"cuda:{i}" for i in range(visible_count())]
    if not every:
        print("no GPU visible: this benchmark measures GPUs")
        return 2
    rows = []
    for name in [p.strip() for p in args.phase.split(",") if p.strip()]:
        if name not in PHASES:
            parser.error(f"unknown phase {name!r}: choose from {', '.join(PHASES)}")
        print(f"\n== phase {name} on {len(every)} GPU(s)", flush=True)
        rows.append(PHASES[name](args, every))
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1))
    pool.shutdown_judges()
    for row in rows:
        if "ratio" in row:
            print(f"{row['phase']:12s} {row['gpus']} GPUs {row['all']['rate']:7.1f} /min, 1 GPU {row['one']['rate']:7.1f}"
                  f" /min: {row['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
