"""Candidates per minute: 16 variants (num_warps x num_stages) of a built-in Triton solution on one task, evaluated back
to back, first as fresh sources (never compiled before: each carries this run's nonce), then the same 16 again
(their kernels in the Triton cache, the reference's rounds in the judge's cache).

    python benchmarks/eval_throughput.py                       # GPU: softmax at its GPU preset
    python benchmarks/eval_throughput.py --device cpu --task softmax
    python benchmarks/eval_throughput.py --judges 1,2,3           # serial against overlapped, in one run
    python benchmarks/eval_throughput.py --before .base           # an earlier engine first, then this one

Prints one line per evaluation (status, time, stage seconds), then candidates per minute for each pass, the
median stage seconds, and the targets (30/min fresh, 60/min repeated on one H100). With `--before DIR` (a folder
holding an earlier engine's `workbench/`, e.g. `git archive REV workbench | tar -x -C DIR`), the same passes run
first with that engine, in a child process started in DIR (a judge started with `python -m` imports the package in
its working directory first), and the table ends with the ratios after/before.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The engine measured: this checkout's, or the one `--before` names (the child process of that run).
ENGINE = Path(os.environ.get("KWB_BENCH_ENGINE") or ROOT)
sys.path.insert(0, str(ENGINE))

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
    """Evaluate `cands` back to back as `evaluate_many` does (overlapped over the device's judges); candidates per
    minute and the results."""
    from workbench.eval.evaluate import evaluate_all
    from workbench.eval.options import EvalOptions

    started = time.perf_counter()
    count = [0]

    def done(_: int, res: wb.Result) -> None:
        count[0] += 1
        t = f"{res.timing.median_ms:.4f} ms" if res.timing else "-"
        proto = res.protocol or {}
        print(f"[{label} {count[0]}/{len(cands)}] {res.candidate_name:24s} {res.status:10s} {t:>12s} "
              f"{res.metadata.get('eval_seconds', 0):5.2f} s {res.stage_seconds} {','.join(res.flags)}\n"
              f"    judge {res.metadata.get('judge_pid', '-')} batches {proto.get('timed_batches')} x "
              f"{proto.get('calls_per_batch')} stop {res.timing.stop_reason if res.timing else '-'} "
              f"compiled {str(proto.get('compiled_reference', '-'))[:20]} phases {proto.get('timing_phases')} "
              f"check {proto.get('check_phases')}\n    pool {proto.get('timing_pool')} {proto.get('calibrate_phases')} "
              f"pauses {proto.get('compile_pauses')} runner start {proto.get('runner_start_s')} s, import "
              f"{proto.get('load_seconds')} s"
              + (f"\n    why: {res.message[:400]}\n    log: {(res.log or '')[-1200:]}"
                 if res.status not in ("ok", "rejected", "incorrect") else ""), flush=True)

    results = evaluate_all(task, cands, EvalOptions(device=device), done)
    return len(cands) / ((time.perf_counter() - started) / 60.0), results


def median_stages(results: list[wb.Result]) -> dict[str, float]:
    names = sorted({k for r in results for k in r.stage_seconds})
    return {k: round(statistics.median(r.stage_seconds.get(k, 0.0) for r in results), 3) for k in names}


def median_phases(results: list[wb.Result]) -> dict[str, float]:
    """Median seconds of each part of the timing rounds (protocol `timing_phases`), and of the batches counted."""
    rows = [r.protocol.get("timing_phases") or {} for r in results]
    names = sorted({k for row in rows for k in row})
    out = {k: round(statistics.median(row.get(k, 0.0) for row in rows), 3) for k in names}
    batches = [r.protocol.get("timed_batches") for r in results if r.protocol.get("timed_batches")]
    if batches:
        out["batches"] = statistics.median(batches)
    return out


def pause_summary(results: list[wb.Result]) -> str:
    """How many evaluations compiled with the device let go of (protocol `compile_pauses`), and the median seconds
    compiled that way and spent getting the device back."""
    logs = [r.protocol.get("compile_pauses") for r in results]
    logs = [p for p in logs if p]
    if not logs:
        return "none"
    return (f"{len(logs)} of {len(results)} evaluations; median compiling "
            f"{statistics.median(p['compiling_s'] for p in logs):.3f} s, getting the device back "
            f"{statistics.median(p['waited_s'] for p in logs):.3f} s")


def measure_before(engine: Path, args: argparse.Namespace) -> dict[tuple[str, str], float]:
    """The same passes with the engine in `engine`, in a child process started there; its rates by (judges, pass)."""
    out = engine / "eval_throughput_before.json"
    env = {**os.environ, "KWB_BENCH_ENGINE": str(engine),
           "PYTHONPATH": str(engine) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--task", args.task, "--device", args.device,
           "--judges", args.judges, "--count", str(args.count), "--json", str(out)]
    print(f"== before: the engine in {engine}", flush=True)
    subprocess.run(cmd, env=env, cwd=str(engine), check=False)
    if not out.is_file():
        print("the run with the earlier engine wrote no figures")
        return {}
    return {(judges, name): rate for judges, name, rate in json.loads(out.read_text())["rates"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="softmax")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--judges", default="",
                        help="comma-separated judge counts to compare in this run, e.g. 1,2,3 (default: the "
                        "engine's own, KWB_JUDGES or 2 on a GPU)")
    parser.add_argument("--before", type=Path, default=None,
                        help="a folder holding an earlier engine's workbench/: measured first, ratios printed")
    parser.add_argument("--json", type=Path, default=None, help="write the rates here")
    parser.add_argument("--count", type=int, default=len(GRID["num_warps"]) * len(GRID["num_stages"]),
                        help="variants per pass (default: all 16)")
    args = parser.parse_args(argv)
    before = measure_before(args.before.resolve(), args) if args.before is not None else {}
    print(f"== the engine in {Path(wb.__file__).resolve().parent.parent}", flush=True)
    task = wb.get_task(args.task)
    counts = [int(v) for v in args.judges.split(",") if v.strip()] or [None]
    rates: list[tuple[str, str, float]] = []
    bad: list[wb.Result] = []
    for judges in counts:
        try:
            from workbench.dispatch.pool import judge_slots, prestart, shutdown_judges
        except ImportError:  # an engine from before the judge pool moved to workbench/dispatch/
            from workbench.eval.caller.pool import judge_slots, prestart, shutdown_judges  # type: ignore[no-redef]

        shutdown_judges()
        if judges is not None:
            os.environ["KWB_JUDGES"] = str(judges)
        n = judge_slots(args.device)
        prestart(args.device)
        warm = [wb.evaluate(task, task.solution_candidate(), device=args.device) for _ in range(n)]
        print(f"\n== {n} judge(s); warm-up: {[w.status for w in warm]} {warm[0].stage_seconds}", flush=True)
        cands = variants(task, secrets.token_hex(4))[:args.count]
        fresh, fresh_results = run_pass("fresh", task, cands, args.device)
        repeated, repeated_results = run_pass("repeated", task, cands, args.device)
        print(f"median stage seconds, fresh:    {median_stages(fresh_results)}")
        print(f"median stage seconds, repeated: {median_stages(repeated_results)}")
        print(f"median timing phases, fresh:    {median_phases(fresh_results)}")
        print(f"median timing phases, repeated: {median_phases(repeated_results)}")
        print(f"compile pauses, fresh:          {pause_summary(fresh_results)}")
        print(f"compile pauses, repeated:       {pause_summary(repeated_results)}")
        bad += [r for r in fresh_results + repeated_results if r.status not in ("ok", "rejected", "incorrect")]
        rates += [(f"{n} judge(s)", "fresh", fresh), (f"{n} judge(s)", "repeated", repeated)]
    print()
    for judges, name, rate in rates:
        was = before.get((judges, name))
        ratio = f"   before {was:6.1f}, after/before {rate / was:.2f}x" if was else ""
        print(f"{judges:11s} {name:9s} {rate:6.1f} candidates/min (target {TARGETS[name]:.0f} on one H100){ratio}")
    if args.json is not None:
        args.json.write_text(json.dumps({"rates": rates}))
    if bad:
        print(f"{len(bad)} evaluations failed to run: {sorted({r.status for r in bad})}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
