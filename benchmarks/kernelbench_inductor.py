"""Calibrate the error budget on an honest different implementation: every KernelBench reference compiled by
Inductor (`torch.compile`), judged as the candidate of its own problem at real size, on every visible GPU.

    python benchmarks/kernelbench_inductor.py --levels 1,2,3 --out inductor.json           # on a GPU machine
    python benchmarks/kernelbench_inductor.py --levels 1 --deadline 500 --out inductor.json # again: resumes
    python benchmarks/kernelbench_inductor.py --ids 1/23,2/6 --device cpu --fit cpu         # a CPU dry run

Inductor reorders reductions, fuses ops and picks its own kernels: its output differs from eager PyTorch by honest
roundoff only, so every verdict should be `ok`. A problem that is not shows either a budget too tight for honest
reordering (the budget is wrong) or a real Inductor numerics difference (explained per problem in
benchmarks/README.md). Target: at least 99% ok.

How the candidate is made, and the one exemption it needs: the reference class is renamed `EagerModel` and
`ModelNew(EagerModel)` runs `torch.compile` of its forward. It is submitted as a declared PyTorch candidate
(`language="torch"`), which the judge holds to correctness, cheats and timing but not to the task's kernel policy
(Inductor's kernels are not the candidate's own source). The runner has Inductor compile in the calling thread and
tqdm start no monitor thread, so no library thread is left after forward for the thread-deferral check to see.

Random draws: a reference whose forward draws random numbers (KernelBench L3/35 draws its LSTM's initial state) is
matched only by a candidate drawing the same numbers. Inductor draws its own unless
`torch._inductor.config.fallback_random` is set, so by default such a problem is `incorrect`, and rightly so;
`--eager-random` sets it (in the candidate's source) to judge the rest of the problem.

Candidates run `--in-flight` at once (default: every judge slot of every visible GPU), each placed on the least busy
GPU. `--out` is a journal: one JSON record per problem, rewritten after each; a rerun skips the problems it holds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kernelbench_aa import DEFAULT_PROBLEMS, only_ids, problems, sample  # noqa: E402

_WRAPPER = '''

class ModelNew(EagerModel):
    """The reference's forward compiled by Inductor."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled_forward = torch.compile(super().forward)

    def forward(self, *args):
        return self._compiled_forward(*args)
'''


_EAGER_RANDOM = '''

import torch._inductor.config

torch._inductor.config.fallback_random = True  # random draws as eager PyTorch makes them
'''


def inductor_candidate(task: Any, eager_random: bool = False) -> Any:
    """The task's reference as `EagerModel`, and `ModelNew` = its forward compiled by Inductor (module doc)."""
    from workbench.candidate import Candidate

    source = re.sub(r"\bModel\b", "EagerModel", task.source) + (_EAGER_RANDOM if eager_random else "") + _WRAPPER
    return Candidate(source=source, language="torch", name=f"{task.name}-inductor",
                     metadata={"role": "inductor-of-reference", "eager_random": eager_random})


def run_problem(level: int, path: Path, device: str, fit: str | None, timeout: float | None,
                eager_random: bool = False) -> dict[str, Any]:
    """Judge one problem's Inductor candidate; a record for the journal ("load_error" when the task cannot load)."""
    import workbench as wb

    started = time.perf_counter()
    record: dict[str, Any] = {"level": level, "problem": path.name, "status": None, "flags": [], "message": "",
                              "eager_random": eager_random}
    try:
        task = wb.load_kernelbench(path, fit=fit)
        result = wb.evaluate(task, inductor_candidate(task, eager_random), device=device, timeout=timeout, compile_reference=False)
    except Exception as exc:  # noqa: BLE001 - one broken problem must not end a run of hundreds
        record.update(status="load_error", message=f"{type(exc).__name__}: {exc}"[:400])
    else:
        budget = result.error_budget or {}
        record.update(status=result.status, flags=list(result.flags), speedup=result.speedup,
                      speedup_verdict=result.speedup_verdict, max_abs_err=result.max_abs_err,
                      max_rel_err=result.max_rel_err, bound=budget.get("bound"),
                      reference_error=budget.get("reference_error"), budget=budget,
                      message=(result.message or "").splitlines()[0][:400] if result.message else "",
                      stages=result.stage_seconds, gpu=result.metadata.get("gpu"), dtype=result.dtype)
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record


def summarize(records: list[dict[str, Any]]) -> str:
    """Counts per level and status, the ok share, and every problem that is not ok with its message."""
    lines = []
    for level in sorted({r["level"] for r in records}):
        counts = Counter(r["status"] for r in records if r["level"] == level)
        lines.append(f"L{level}: " + ", ".join(f"{s} {n}" for s, n in counts.most_common()))
    ok = sum(r["status"] == "ok" for r in records)
    share = ok / len(records) if records else 0.0
    lines.append(f"ok: {ok} of {len(records)} = {share:.1%} (target >= 99%)")
    for r in records:
        if r["status"] != "ok":
            err = f" max_abs_err {r['max_abs_err']:.3g} bound {r.get('bound')}" if r.get("max_abs_err") else ""
            lines.append(f"  L{r['level']} {r['problem']}: {r['status']} {r.get('flags')}{err}  {r['message'][:240]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", default=str(ROOT / DEFAULT_PROBLEMS), help="folder holding level1/, level2/, ...")
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument("--start", type=int, default=0, help="first problem index within each level")
    parser.add_argument("--stop", type=int, help="stop before this index within each level")
    parser.add_argument("--ids", help='only these problems, as level/number: "1/19,2/6"')
    parser.add_argument("--sample", help='a seeded sample per level, e.g. "1:12,2:12,3:6"')
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--fit", choices=["cpu"], help="shrink sizes (a CPU dry run); default: real sizes")
    parser.add_argument("--timeout", type=float, help="seconds per evaluation (the engine's default otherwise)")
    parser.add_argument("--in-flight", type=int, help="candidates at once (default: every judge slot of every GPU)")
    parser.add_argument("--deadline", type=float, help="start no new problem after this many seconds")
    parser.add_argument("--eager-random", action="store_true",
                        help="Inductor draws random numbers as eager PyTorch does (module doc)")
    parser.add_argument("--out", type=Path, help="JSON journal of records; a rerun skips the problems it holds")
    args = parser.parse_args(argv)
    try:
        levels = [int(v) for v in args.levels.split(",") if v.strip()]
    except ValueError:
        parser.error(f"--levels takes numbers like 1,2,3, not {args.levels!r}")
    chosen = problems(args.problems, levels, args.start, args.stop)
    if args.ids:
        chosen = only_ids(chosen, args.ids)
    if args.sample:
        chosen = sample(chosen, args.sample, args.seed)
    records: list[dict[str, Any]] = []
    if args.out is not None and args.out.exists():
        records = json.loads(args.out.read_text()).get("records", [])
    done = {(r["level"], r["problem"]) for r in records}
    todo = [(level, path) for level, path in chosen if (level, path.name) not in done]
    print(f"{len(chosen)} problems, {len(done & {(lv, p.name) for lv, p in chosen})} already judged, "
          f"{len(todo)} to judge", flush=True)
    in_flight = args.in_flight or _slots(args.device)
    started = time.perf_counter()
    lock = threading.Lock()

    def one(item: tuple[int, Path]) -> None:
        if args.deadline and time.perf_counter() - started > args.deadline:
            return
        rec = run_problem(*item, args.device, args.fit, args.timeout, args.eager_random)
        with lock:
            records.append(rec)
            speed = f" {rec['speedup']:.3f}x" if rec.get("speedup") else ""
            print(f"[{len(records)}/{len(chosen)}] L{rec['level']} {rec['problem']}: {rec['status']}"
                  f"{rec['flags'] or ''}{speed} ({rec['seconds']:.1f} s, {rec.get('gpu')}) "
                  f"{rec['message'][:160] if rec['status'] != 'ok' else ''}", flush=True)
            if args.out is not None:
                args.out.write_text(json.dumps({"records": records}, indent=1, default=str))

    with ThreadPoolExecutor(in_flight) as ex:
        list(ex.map(one, todo))
    left = len(chosen) - len({(r["level"], r["problem"]) for r in records} & {(lv, p.name) for lv, p in chosen})
    if left:
        print(f"deadline reached: {left} problems not judged; run again with the same --out to go on", flush=True)
    print(summarize([r for r in records if (r["level"], r["problem"]) in {(lv, p.name) for lv, p in chosen}]))
    return 0


def _slots(device: str) -> int:
    """Every judge slot of every visible GPU (1 on the CPU)."""
    if not device.startswith("cuda"):
        return 1
    from workbench.dispatch import pool
    from workbench.dispatch.gpus import visible_count

    return max(1, pool.judge_slots("cuda") * max(1, visible_count()))


if __name__ == "__main__":
    sys.exit(main())
