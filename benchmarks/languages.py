"""One softmax in every kernel language, judged on one GPU, and a cheat in each new language rejected.

    python benchmarks/languages.py                                   # cuda, KernelBench at .kernelbench/KernelBench
    python benchmarks/languages.py --kernelbench ~/KernelBench --json languages.json
    python benchmarks/languages.py --device cpu --size batch_size=8,dim=64   # what a CPU machine does with each

The problem is KernelBench's level1/23_Softmax (softmax(x, dim=1)) at its own sizes, from the checkout that
`--kernelbench` names (the built-in `softmax` task, the same operation, when there is none). The candidates are
`benchmarks/candidates/softmax_<language>.py`: Triton, CUDA (load_inline), CuTe DSL, Helion, and PyTorch as a
declared baseline. Each is evaluated with timing; the table gives status, flags, median time, speedup against the
eager reference with its 95% interval, coverage (the share of GPU kernel time in the candidate's own kernels), load
seconds (CUDA builds, CuTe DSL compiles) and the configuration Helion's autotuner chose. A language whose package
is missing here gets a row saying so (install: `pip install -e '.[cute]'`, `pip install -e '.[helion]'`).

Then the gallery's cheats in the new languages (tests/cheats/cute_torch_handoff.py, helion_cached_output.py) on
the gallery's softmax: each must be rejected with the flag its manifest names. Exit status 1 when an honest
candidate is not ok on a GPU or a cheat is not caught.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "cheats"))

import gallery  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import languages  # noqa: E402

CANDIDATES = ROOT / "benchmarks" / "candidates"
#: Table order; the PyTorch candidate is a declared baseline (timed, the kernel policy not applied).
ORDER = ("triton", "cuda", "cute", "helion", "torch")
PROBLEM = Path("level1") / "23_Softmax.py"
CHEATS = ("cute_torch_handoff.py", "helion_cached_output.py")


def softmax_task(kernelbench: Path) -> wb.Task:
    path = kernelbench / "KernelBench" / PROBLEM
    if not path.is_file():
        path = kernelbench / PROBLEM
    if path.is_file():
        return wb.load_kernelbench(path)
    print(f"note: no {PROBLEM} under {kernelbench}; using the built-in softmax task (the same operation)",
          file=sys.stderr)
    return wb.get_task("softmax")


def candidate(language: str) -> wb.Candidate:
    return wb.Candidate.from_file(CANDIDATES / f"softmax_{language}.py", language=language,
                                  name=f"softmax-{language}")


def row(language: str, result: wb.Result | None, seconds: float, why: str = "") -> dict[str, Any]:
    if result is None:
        return {"language": language, "status": "skipped", "why": why, "eval_s": round(seconds, 1)}
    timing = result.timing
    return {
        "language": language, "status": result.status, "flags": result.flags, "warnings": result.warnings,
        "median_ms": timing.median_ms if timing else None,
        "speedup": result.speedup, "speedup_ci": list(result.speedup_ci) if result.speedup_ci else None,
        "speedup_verdict": result.speedup_verdict, "coverage": result.coverage,
        "load_s": result.protocol.get("load_seconds"), "tuned_config": result.metadata.get("tuned_config"),
        "evidence": result.evidence, "eval_s": round(seconds, 1),
        "message": result.message.splitlines()[0][:200] if result.message else "",
    }


def evaluate_languages(task: wb.Task, device: str, size: dict[str, Any] | None,
                       only: tuple[str, ...] = ORDER) -> list[dict[str, Any]]:
    rows = []
    for language in [name for name in ORDER if name in only]:
        available = languages.get(language).availability(device)
        started = time.perf_counter()
        if not available.runs and languages.get(language).extra and device.startswith("cuda"):
            rows.append(row(language, None, 0.0, available.message))  # its package is not installed here
            continue
        result = wb.evaluate(task, candidate(language), device=device, size=size, time_it=True)
        rows.append(row(language, result, time.perf_counter() - started))
        print(f"  {language:<7} {result.status:<14} {time.perf_counter() - started:6.1f} s", file=sys.stderr)
    return rows


def evaluate_cheats(device: str, only: tuple[str, ...] = ORDER) -> list[dict[str, Any]]:
    rows = []
    for name in [n for n in CHEATS if gallery.MANIFEST[n]["requires"] in only]:
        available = languages.get(gallery.MANIFEST[name]["requires"]).availability(device)
        if not available.runs:
            rows.append({"cheat": name, "status": "skipped", "why": available.message})
            continue
        started = time.perf_counter()
        result = gallery.evaluate(name, device, time_it=True)
        problems = gallery.verdict_problems(name, result, device)
        rows.append({"cheat": name, "status": result.status, "flags": result.flags,
                     "expected": gallery.expected_flag(name, device), "caught": not problems,
                     "problems": problems, "eval_s": round(time.perf_counter() - started, 1),
                     "message": result.message.splitlines()[0][:200] if result.message else ""})
    return rows


def _fmt(value: Any, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def _note(r: dict[str, Any]) -> str:
    return (r["tuned_config"] or "-")[:60] if r["status"] == "ok" else (r["message"] or "-")[:100]


def print_tables(task: wb.Task, device: str, rows: list[dict[str, Any]], cheats: list[dict[str, Any]]) -> None:
    print(f"\n{task.name} on {device}\n")
    print("| language | status | flags | median ms | speedup [95% CI] | coverage | load s | tuned config, or why not ok |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] == "skipped":
            print(f"| {r['language']} | not run | - | - | - | - | - | {r['why'][:80]} |")
            continue
        ci = r["speedup_ci"]
        speed = f"{_fmt(r['speedup'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else _fmt(r["speedup"])
        cover = f"{100 * r['coverage']:.0f}%" if r["coverage"] is not None else "-"
        print(f"| {r['language']} | {r['status']} | {','.join(r['flags']) or '-'} | {_fmt(r['median_ms'], '.4g')} | "
              f"{speed} | {cover} | {_fmt(r['load_s'], '.1f')} | {_note(r)} |")
    print("\n| cheat | status | flags | expected | caught |")
    print("|---|---|---|---|---|")
    for c in cheats:
        if c["status"] == "skipped":
            print(f"| {c['cheat']} | not run | - | - | {c['why'][:80]} |")
            continue
        print(f"| {c['cheat']} | {c['status']} | {','.join(c['flags']) or '-'} | {c['expected']} | "
              f"{'yes' if c['caught'] else 'NO'} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--kernelbench", type=Path, default=ROOT / ".kernelbench" / "KernelBench",
                        help="a KernelBench checkout (its KernelBench/level1 folder holds 23_Softmax.py)")
    parser.add_argument("--size", default=None, help="k=v,k=v to override the problem's sizes (e.g. on a CPU)")
    parser.add_argument("--json", type=Path, default=None, help="write every row here")
    parser.add_argument("--only", default=",".join(ORDER), help="comma-separated languages (default: all)")
    args = parser.parse_args(argv)
    only = tuple(name.strip() for name in args.only.split(",") if name.strip())
    unknown = [name for name in only if name not in ORDER]
    if unknown:
        parser.error(f"unknown language(s) {', '.join(unknown)}: choose from {', '.join(ORDER)}")
    size = dict(kv.split("=", 1) for kv in args.size.split(",")) if args.size else None
    size = {k: int(v) if v.isdigit() else v for k, v in size.items()} if size else None
    task = softmax_task(args.kernelbench)
    rows = evaluate_languages(task, args.device, size, only)
    cheats = evaluate_cheats(args.device, only)
    print_tables(task, args.device, rows, cheats)
    if args.json:
        args.json.write_text(json.dumps({"task": task.name, "device": args.device, "languages": rows,
                                         "cheats": cheats}, indent=1, default=str))
    on_gpu = args.device.startswith("cuda")
    failed = [r["language"] for r in rows if on_gpu and r["status"] not in ("ok", "skipped")]
    failed += [c["cheat"] for c in cheats if c["status"] != "skipped" and not c["caught"]]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
