"""KernelBench A/A: every reference submitted as its own torch candidate, at unchanged sizes, on a GPU.

Every verdict here should be `ok` with a speedup within noise of 1.0: the candidate *is* the reference. Anything
else is the harness's fault (a tolerance too tight for honest fp32 roundoff, a protocol that runs out of memory,
a timer that favours one side), so this is the workbench's own acceptance test on real workloads.

    python benchmarks/kernelbench_aa.py --extract PATH/TO/KernelBench.git      # once: problems into ./.kernelbench
    python benchmarks/kernelbench_aa.py --levels 1,2 --out aa.json             # on a GPU machine
    python benchmarks/kernelbench_aa.py --levels 1 --start 0 --stop 50 --out aa_l1a.json   # in batches
    python benchmarks/kernelbench_aa.py --device cpu --fit cpu --no-time       # the same on a laptop, shrunk

One progress line per problem, then a table: counts per status per level, and the speedup distribution (median,
5th and 95th percentiles, share of pairs within 0.98-1.02). `--out` keeps one JSON record per problem (status,
flags, speedup, message head, seconds) and is rewritten after every problem, so an interrupted run keeps its rows.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROBLEMS = Path(".kernelbench") / "KernelBench"
#: A/A speedups inside this band count as "the same" (timing noise of two identical programs).
SAME_BAND = (0.98, 1.02)


def extract(gitdir: str | Path, dest: str | Path = DEFAULT_PROBLEMS.parent, ref: str = "HEAD") -> Path:
    """Copy the `KernelBench/` problem folder of a KernelBench git repository (bare or not) at `ref` into `dest`;
    returns the problems folder (`dest/KernelBench`)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        blob = subprocess.run(["git", f"--git-dir={gitdir}", "archive", "--format=tar", ref, "KernelBench"],
                              check=True, capture_output=True).stdout
    except FileNotFoundError as exc:
        raise SystemExit("git is not installed: --extract needs it") from exc
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"cannot read KernelBench/ at {ref} from {gitdir}: {exc.stderr.decode().strip()[:300]}. "
                         "Give the repository's .git directory (or a bare clone).") from exc
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "KernelBench"


def _number(path: Path) -> tuple[int, str]:
    m = re.match(r"(\d+)_", path.name)
    return (int(m.group(1)) if m else 1 << 30, path.name)


def problems(folder: str | Path, levels: list[int], start: int = 0, stop: int | None = None,
             limit: int | None = None) -> list[tuple[int, Path]]:
    """(level, path) of the problems to run, in KernelBench's numbering; `start`/`stop` slice each level's list
    (batching a long run), `limit` caps the total."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SystemExit(f"no problems folder {folder}: extract them first with --extract GITDIR, or pass "
                         "--problems PATH")
    chosen: list[tuple[int, Path]] = []
    for level in levels:
        sub = folder / f"level{level}"
        if not sub.is_dir():
            raise SystemExit(f"{folder} has no level{level}/ folder (levels there: "
                             f"{', '.join(sorted(p.name for p in folder.glob('level*'))) or 'none'})")
        files = sorted(sub.glob("*.py"), key=_number)[start:stop]
        chosen += [(level, p) for p in files]
    return chosen[:limit] if limit is not None else chosen


def only_ids(chosen: list[tuple[int, Path]], spec: str) -> list[tuple[int, Path]]:
    """The problems named in `spec` ("1/19,2/6": level/number in KernelBench's numbering), in that order."""
    try:
        wanted = [tuple(int(v) for v in part.split("/")) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--ids takes level/number pairs like 1/19,2/6, not {spec!r}") from None
    by_id = {(level, _number(path)[0]): (level, path) for level, path in chosen}
    missing = [f"{lv}/{num}" for lv, num in wanted if (lv, num) not in by_id]
    if missing:
        raise SystemExit(f"no such problem(s) among the chosen levels: {', '.join(missing)}")
    return [by_id[(lv, num)] for lv, num in wanted]


def sample(chosen: list[tuple[int, Path]], spec: str, seed: int) -> list[tuple[int, Path]]:
    """A seeded sample: `spec` is "1:12,2:12,3:6" (problems per level), drawn with random.Random(seed)."""
    import random

    rng = random.Random(seed)
    picked: list[tuple[int, Path]] = []
    for part in spec.split(","):
        level, count = (int(v) for v in part.split(":"))
        pool = [item for item in chosen if item[0] == level]
        picked += sorted(rng.sample(pool, min(count, len(pool))), key=lambda item: _number(item[1]))
    return picked


def run_problem(level: int, path: Path, device: str, *, fit: str | None = None, time_it: bool = True,
                timeout: float | None = None, compile_reference: bool = False) -> dict[str, Any]:
    """Evaluate one reference as its own candidate; a record for the JSON output. A task that cannot even be
    loaded is recorded with status "load_error"."""
    import workbench as wb
    from workbench.tasks.kernelbench import reference_as_candidate

    started = time.perf_counter()
    record: dict[str, Any] = {"level": level, "problem": path.name, "status": None, "flags": [], "warnings": [],
                              "speedup": None, "message": "", "seconds": None}
    try:
        task = wb.load_kernelbench(path, fit=fit)
        result = wb.evaluate(task, reference_as_candidate(task), device=device, time_it=time_it, timeout=timeout,
                             compile_reference=compile_reference)
    except Exception as exc:  # noqa: BLE001 - one broken problem must not end a run of hundreds
        record.update(status="load_error", message=f"{type(exc).__name__}: {exc}"[:300])
    else:
        record.update(status=result.status, flags=list(result.flags), warnings=list(result.warnings),
                      speedup=result.speedup, message=result.message.splitlines()[0][:300] if result.message else "",
                      max_abs_err=result.max_abs_err, precision=getattr(task.precision, "name", ""),
                      kernel_policy=task.kernel_policy, size=result.size, speedup_ci=result.speedup_ci,
                      speedup_verdict=result.speedup_verdict, stages=result.stage_seconds,
                      stop=result.timing.stop_reason if result.timing else None,
                      n=result.timing.n if result.timing else None,
                      ms=result.timing.median_ms if result.timing else None,
                      ref_ms=result.reference_timing.median_ms if result.reference_timing else None,
                      memory_gib=result.protocol.get("judge_memory_gib"),
                      check_phases=result.protocol.get("check_phases"),
                      # Where each side ran: an A/A bias differs when the judge timed the reference itself.
                      reference_timed_in=result.protocol.get("reference_timed_in"),
                      runner=result.protocol.get("runner"))
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per status per level, and the speedup distribution of the problems that were timed."""
    levels = sorted({r["level"] for r in records})
    counts = {level: dict(Counter(r["status"] for r in records if r["level"] == level)) for level in levels}
    speedups = [float(r["speedup"]) for r in records if r.get("speedup") is not None]
    dist: dict[str, Any] = {"n": len(speedups)}
    if speedups:
        lo, hi = SAME_BAND
        dist.update(median=_percentile(speedups, 0.5), p5=_percentile(speedups, 0.05),
                    p95=_percentile(speedups, 0.95),
                    within_band=sum(lo <= s <= hi for s in speedups) / len(speedups))
    flags = Counter(f for r in records for f in r.get("flags", []))
    seconds = [float(r["seconds"]) for r in records if r.get("seconds") is not None]
    wall = {"median": _percentile(seconds, 0.5), "p95": _percentile(seconds, 0.95), "max": max(seconds)} \
        if seconds else {}
    verdicts = Counter(r.get("speedup_verdict") for r in records if r["status"] == "ok")
    return {"total": len(records), "ok": sum(r["status"] == "ok" for r in records), "counts": counts,
            "speedup": dist, "flags": dict(flags.most_common()), "seconds": wall,
            "verdicts": {str(k): v for k, v in verdicts.items()}}


def format_summary(summary: dict[str, Any]) -> str:
    """The final table: one row per level, one column per status; then the speedup distribution and flags."""
    statuses = sorted({s for c in summary["counts"].values() for s in c}, key=lambda s: (s != "ok", s))
    header = ["level", *statuses, "total"]
    rows = [[f"L{level}", *[str(c.get(s, 0)) for s in statuses], str(sum(c.values()))]
            for level, c in summary["counts"].items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    d = summary["speedup"]
    if d["n"]:
        lo, hi = SAME_BAND
        lines.append(f"speedup over {d['n']} timed pairs: median {d['median']:.4f}, p5 {d['p5']:.4f}, "
                     f"p95 {d['p95']:.4f}, within {lo}-{hi}: {d['within_band']:.0%}")
    else:
        lines.append("speedup: none timed")
    if summary["flags"]:
        lines.append("flags: " + ", ".join(f"{k} x{v}" for k, v in summary["flags"].items()))
    if summary.get("seconds"):
        w = summary["seconds"]
        lines.append(f"wall per evaluation: median {w['median']:.1f} s, p95 {w['p95']:.1f} s, max {w['max']:.1f} s "
                     "(targets 15 / 60 / 120 s)")
    if summary.get("verdicts"):
        lines.append("speedup verdicts of the ok ones: " + ", ".join(f"{k} x{v}" for k, v in summary["verdicts"].items()))
    lines.append(f"ok: {summary['ok']} of {summary['total']}")
    return "\n".join(lines)


def _progress(i: int, n: int, rec: dict[str, Any]) -> str:
    speed = f" speedup {rec['speedup']:.3f}" if rec.get("speedup") is not None else ""
    flags = f" [{','.join(rec['flags'])}]" if rec.get("flags") else ""
    tail = f"  {rec['message'][:100]}" if rec["status"] != "ok" else ""
    return f"[{i}/{n}] L{rec['level']} {rec['problem']}: {rec['status']}{flags}{speed} ({rec['seconds']:.1f} s){tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", default=str(DEFAULT_PROBLEMS), help="folder holding level1/, level2/, ...")
    parser.add_argument("--extract", metavar="GITDIR", help="first copy the problems out of this KernelBench git "
                        "directory into the --problems folder's parent")
    parser.add_argument("--levels", default="1,2,3", help="comma-separated levels (default 1,2,3)")
    parser.add_argument("--start", type=int, default=0, help="first problem index within each level")
    parser.add_argument("--stop", type=int, help="stop before this index within each level")
    parser.add_argument("--limit", type=int, help="at most this many problems in all")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--fit", choices=["cpu"], help="shrink sizes (for a CPU dry run); default: unchanged sizes")
    parser.add_argument("--no-time", action="store_true", help="correctness only")
    parser.add_argument("--timeout", type=float, help="seconds per evaluation (the engine's default otherwise)")
    parser.add_argument("--out", help="write the per-problem records (and the summary) to this JSON file")
    parser.add_argument("--compile-reference", action="store_true",
                        help="also time torch.compile of the reference (slow; an A/A compares eager with eager)")
    parser.add_argument("--shard", default="0/1", help="K/N: run every N-th problem starting at K (one GPU each)")
    parser.add_argument("--gpus", type=int, default=1, help="run N shards at once, one per GPU, and merge them")
    parser.add_argument("--deadline", type=float, help="stop starting new problems after this many seconds")
    parser.add_argument("--ids", help='only these problems, as level/number: "1/19,1/34,2/6"')
    parser.add_argument("--sample", help='a seeded sample per level, e.g. "1:12,2:12,3:6"')
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    parser.add_argument("--stacks", type=float, metavar="SECONDS",
                        help="when a problem runs longer than this, write the stacks of this process and of the "
                        "judge every SECONDS (to --stacks-file, or stderr): where a problem that seems stuck is")
    parser.add_argument("--stacks-file", help="file for --stacks")
    args = parser.parse_args(argv)
    arm = _watch_stacks(args.stacks, args.stacks_file) if args.stacks else (lambda: None)
    if args.gpus > 1:
        return _fan_out(args, argv if argv is not None else sys.argv[1:])
    if args.extract:
        print(f"extracted to {extract(args.extract, Path(args.problems).parent)}", flush=True)
        if not (args.ids or args.sample or args.limit or args.stop):
            # `--extract` alone is the one-time setup the usage names: it does not go on to judge all 250 problems.
            print("run again without --extract (on a GPU machine) to judge them")
            return 0
    try:
        levels = [int(v) for v in args.levels.split(",") if v.strip()]
    except ValueError:
        parser.error(f"--levels takes numbers like 1,2,3, not {args.levels!r}")
    chosen = problems(args.problems, levels, args.start, args.stop, args.limit)
    if args.ids:
        chosen = only_ids(chosen, args.ids)
    if args.sample:
        chosen = sample(chosen, args.sample, args.seed)
    k, n = (int(v) for v in args.shard.split("/"))
    chosen = chosen[k::n]
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    for i, (level, path) in enumerate(chosen, 1):
        if args.deadline and time.perf_counter() - started > args.deadline:
            print(f"deadline reached: {len(chosen) - i + 1} problems not started", flush=True)
            break
        arm()
        rec = run_problem(level, path, args.device, fit=args.fit, time_it=not args.no_time, timeout=args.timeout,
                          compile_reference=args.compile_reference)
        records.append(rec)
        print(_progress(i, len(chosen), rec), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"records": records}, indent=1, default=str))
    summary = summarize(records)
    if args.out:
        Path(args.out).write_text(json.dumps({"records": records, "summary": summary}, indent=1, default=str))
    print(format_summary(summary))
    return 0 if summary["ok"] == summary["total"] else 1


def _watch_stacks(seconds: float, path: str | None) -> Any:
    """Stacks of the judge (KWB_JUDGE_STACKS, read when it starts) and of this process, every `seconds` while one
    problem runs longer than that; returns the function that re-arms this process's watch (before each problem)."""
    import faulthandler
    import os

    os.environ["KWB_JUDGE_STACKS"] = str(seconds)
    if path:
        os.environ["KWB_JUDGE_STACKS_FILE"] = path
    out = open(path, "a") if path else sys.stderr  # noqa: SIM115 - lives as long as the run
    return lambda: faulthandler.dump_traceback_later(seconds, repeat=True, file=out)


def _fan_out(args: argparse.Namespace, argv: list[str]) -> int:
    """One shard per GPU (CUDA_VISIBLE_DEVICES pinned), run at once; their records merged into one summary."""
    import os

    base = [a for a in argv if not a.startswith(("--gpus=", "--out=", "--shard="))]
    procs, outs = [], []
    for gpu in range(args.gpus):
        out = f"{args.out or 'aa'}.shard{gpu}.json"
        outs.append(out)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        procs.append(subprocess.Popen([sys.executable, __file__, *_strip(base), "--shard", f"{gpu}/{args.gpus}",
                                       "--out", out], env=env))
    for p in procs:
        p.wait()
    records = []
    for out in outs:
        if Path(out).exists():
            records += json.loads(Path(out).read_text()).get("records", [])
    summary = summarize(records)
    if args.out:
        Path(args.out).write_text(json.dumps({"records": records, "summary": summary}, indent=1, default=str))
    print(format_summary(summary))
    return 0 if summary["ok"] == summary["total"] else 1


def _strip(argv: list[str]) -> list[str]:
    """argv without the values of --gpus/--out/--shard given as separate words."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--gpus", "--out", "--shard"):
            skip = True
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
