"""A/A pairs timed with the reference in the judge's process against in a runner of its own, in one run.

Every problem's reference is judged against itself (`reference_as_candidate`) by judges alive side by side, one per
`--sides` entry (`SIDE_ENV`: the environment each judge starts with): `judge` times the reference in its own process
(`KWB_REFERENCE_RUNNER=0`), `runner` in a runner like the candidate's (the default where the time decides a
verdict), and `unpinned` / `judge-unpinned` the same with the timed processes left to the scheduler
(`KWB_TIMING_PIN=0`). The judges take turns per problem and repetition, the order swapped every repetition, so drift
of the machine falls on all of them. Identical code should read 1.00 and "same" (the CI inside the 2% band); a side
that does not is where the timing favours one process.

    PYTHONPATH=. python benchmarks/aa_reference_side.py --ids 1/39,2/33,3/22 --paths tests/kernelbench/level1/13_Max_first_dim.py
    PYTHONPATH=. python benchmarks/aa_reference_side.py --device cpu --fit cpu --ids "" --paths tests/kernelbench/23_Softmax.py

One line per evaluation, then per side: "same" count, the largest deviation from 1, the median wall time of an
evaluation. `--out` keeps the records as JSON, each with its per-round samples (so a paired and an unpaired
reading of the same rounds can be compared afterwards).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_aa import DEFAULT_PROBLEMS, only_ids, problems  # noqa: E402

#: Each side's judge environment: the reference in the judge's process, in a runner of its own, and in a runner
#: with the timed processes pinned to one core (`timing_placement.OneCore` on a GPU).
SIDE_ENV = {"judge": {"KWB_REFERENCE_RUNNER": "0"}, "runner": {"KWB_REFERENCE_RUNNER": "1"},
            "pinned": {"KWB_REFERENCE_RUNNER": "1", "KWB_TIMING_PIN": "1"},
            "judge-pinned": {"KWB_REFERENCE_RUNNER": "0", "KWB_TIMING_PIN": "1"},
            "unpinned": {"KWB_REFERENCE_RUNNER": "1", "KWB_TIMING_PIN": "0"},
            "judge-unpinned": {"KWB_REFERENCE_RUNNER": "0", "KWB_TIMING_PIN": "0"}}
#: Sample size: the problems whose A/A pairs were not "same" in earlier runs (the seeded sample's L1/39, L2/33,
#: L2/18 and its launch-bound L3 networks) and two of the test suite's small ones.
DEFAULT_IDS = "1/39,2/33,2/18,3/7,3/20,3/22"
DEFAULT_PATHS = "tests/kernelbench/level1/13_Max_first_dim.py,tests/kernelbench/level2/6_Einops_HeadSplit_Softmax.py"


def start_judges(device: str, sides: list[str]) -> dict[str, Any]:
    """One judge per side; the switches are read from the environment each judge starts with."""
    from workbench.dispatch.judges import Judge

    judges = {}
    for side in sides:
        saved = {k: os.environ.get(k) for k in SIDE_ENV[side]}
        os.environ.update(SIDE_ENV[side])
        judges[side] = Judge(device, peers=len(sides))
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    for judge in judges.values():
        judge.wait_ready(timeout=300)
    return judges


def evaluate_on(judge: Any, task: Any, device: str) -> dict[str, Any]:
    from workbench.eval.evaluate import make_job, resolve_options
    from workbench.eval.results import result_from_reply
    from workbench.tasks.kernelbench import reference_as_candidate

    cand = reference_as_candidate(task)
    job = make_job(task, cand, resolve_options(None, device, {}))
    started = time.perf_counter()
    reply = judge.request(job, job.compile_timeout + 30 * job.timeout + 600)
    wall = time.perf_counter() - started
    res = result_from_reply(task, cand, job, reply)
    proto = res.protocol or {}
    return {"status": res.status, "speedup": res.speedup, "ci": res.speedup_ci, "verdict": res.speedup_verdict,
            "wall": round(wall, 2), "ref_ms": res.reference_timing.median_ms if res.reference_timing else None,
            "ms": res.timing.median_ms if res.timing else None, "stop": res.timing.stop_reason if res.timing else "",
            "timed_in": proto.get("reference_timed_in", "judge"), "wait": proto.get("reference_runner_wait_s"),
            "runner": proto.get("runner", ""), "n": len(res.timing.samples_ms) if res.timing else 0,
            "stages": dict(res.stage_seconds), "message": (res.message or "")[:200],
            "ref_samples": list(res.reference_timing.samples_ms) if res.reference_timing else [],
            "samples": list(res.timing.samples_ms) if res.timing else [],
            "protocol": {k: proto.get(k) for k in ("memory_released_rounds",
                                                   "calls_per_batch", "timing_input_sets", "timed_batches",
                                                   "timing_phases", "timing_basis", "speedup_ci_method")}}


def _line(name: str, side: str, rec: dict[str, Any]) -> str:
    if rec["speedup"] is None:
        return f"{name:44s} {side:12s} {rec['status']} {rec['message'][:120]} ({rec['wall']:.1f} s)"
    lo, hi = rec["ci"] or (float("nan"), float("nan"))
    return (f"{name:44s} {side:12s} {rec['speedup']:.3f} [{lo:.3f}, {hi:.3f}] {rec['verdict']:12s} "
            f"ref {rec['ref_ms']:.4f} ms cand {rec['ms']:.4f} ms n {rec['n']} {rec['stop']}  {rec['wall']:.1f} s  "
            f"({rec['timed_in'][:60]}; candidate runner {rec['runner'] or '?'}; "
            f"judge released {rec['protocol'].get('memory_released_rounds')}, sets "
            f"{rec['protocol'].get('timing_input_sets')})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=str(DEFAULT_PROBLEMS))
    parser.add_argument("--ids", default=DEFAULT_IDS, help=f"KernelBench level/number pairs (default {DEFAULT_IDS})")
    parser.add_argument("--paths", default=DEFAULT_PATHS, help="problem files, comma-separated")
    parser.add_argument("--reps", type=int, default=2, help="evaluations per problem and side (default 2)")
    parser.add_argument("--sides", default="judge,runner", help=f"judges to compare, of {', '.join(SIDE_ENV)}")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--fit", choices=["cpu"], help="shrink sizes (a CPU dry run)")
    parser.add_argument("--deadline", type=float, help="start no new problem after this many seconds")
    parser.add_argument("--out", help="JSON records")
    args = parser.parse_args(argv)

    import workbench as wb

    chosen: list[Path] = []
    if args.ids:
        folder = Path(args.problems)
        if folder.is_dir():
            chosen += [p for _, p in only_ids(problems(folder, [1, 2, 3]), args.ids)]
        else:
            print(f"no KernelBench problems in {folder}: --ids skipped", flush=True)
    chosen += [Path(p) for p in args.paths.split(",") if p]
    sides = [s for s in args.sides.split(",") if s]
    unknown = [s for s in sides if s not in SIDE_ENV]
    if unknown:
        parser.error(f"unknown side(s) {', '.join(unknown)}: choose from {', '.join(SIDE_ENV)}")
    judges = start_judges(args.device, sides)
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        for path in chosen:
            if args.deadline and time.perf_counter() - started > args.deadline:
                print(f"deadline: {path.name} and later not run", flush=True)
                break
            task = wb.load_kernelbench(path, fit=args.fit)
            for rep in range(args.reps):
                for side in (sides if rep % 2 == 0 else sides[::-1]):
                    rec = {"problem": path.name, "side": side, "rep": rep, **evaluate_on(judges[side], task,
                                                                                        args.device)}
                    records.append(rec)
                    print(_line(path.name[:44], side, rec), flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(records, indent=1))
    finally:
        for judge in judges.values():
            judge.close()
    print()
    for side in sides:
        mine = [r for r in records if r["side"] == side]
        timed = [r for r in mine if r["speedup"]]
        same = sum(r["verdict"] == "same" for r in timed)
        spread = max((abs(math.log(r["speedup"])) for r in timed), default=float("nan"))
        walls = [r["wall"] for r in mine]
        print(f"{side:12s}: same {same} of {len(mine)}, ok {sum(r['status'] == 'ok' for r in mine)}, "
              f"largest |speedup - 1| {math.expm1(spread):.3f}, median wall {statistics.median(walls) if walls else 0:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
