"""Wall time of one evaluation: the workbench against KernelBench's own harness, same problems, same kernels.

For each KernelBench problem the kernel is the reference itself (renamed `ModelNew`), so both harnesses judge
identical code and must both call it correct. Per problem this prints the wall time of `wb.evaluate` (a warm
judge pool: the judge and its fork server were started by an earlier evaluation) and of KernelBench's
`eval_kernel_against_ref` (in this process, after one warm-up problem), their ratio, and the statistics each one
bought: the workbench's timed samples and stop reason against KernelBench's fixed trial count. Then where the
workbench's time went (`Result.stage_seconds`: scan, load, calibrate, check, count, time, cover) and the median
ratio. **Target: workbench / KernelBench <= 0.5 at equal or better statistics.**

KernelBench's harness is public code that is never part of this project: copy its `src/` folder into a
git-ignored folder and name it (it also needs `pydantic` and `requests`):

    git --git-dir=PATH/TO/KernelBench.git archive HEAD src | tar -x -C .kernelbench-src
    PYTHONPATH=. python benchmarks/eval_vs_kernelbench.py --harness .kernelbench-src/src
    PYTHONPATH=. python benchmarks/eval_vs_kernelbench.py --device cpu --fit cpu --ids 1/1,1/19   # our side only

The default problems are KernelBench's usual level-1 examples (1, 19, 23, 40) plus two level-2 problems (a conv
with an epilogue, a GEMM with an epilogue) and one level-3 network (`--ids` as level/number pairs).

KernelBench's harness needs CUDA; without it (or without `--harness`) only the workbench column is measured,
and the script says so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_aa import DEFAULT_PROBLEMS, only_ids, problems  # noqa: E402

#: KernelBench's usual settings in its evaluation scripts: 5 correctness trials, 100 timed trials.
KB_CORRECT_TRIALS = 5
KB_PERF_TRIALS = 100
#: KernelBench's level-1 examples, two level-2 problems (conv + epilogue, GEMM + epilogue) and one level-3 network.
DEFAULT_IDS = "1/1,1/19,1/23,1/40,2/1,2/12,3/1"


def workbench_eval(path: Path, device: str, fit: str | None) -> dict[str, Any]:
    import workbench as wb
    from workbench.tasks.kernelbench import reference_as_candidate

    task = wb.load_kernelbench(path, fit=fit)
    started = time.perf_counter()
    res = wb.evaluate(task, reference_as_candidate(task), device=device)
    wall = time.perf_counter() - started
    return {"wall": wall, "status": res.status, "speedup": res.speedup,
            "n": res.timing.n if res.timing else 0, "stop": res.timing.stop_reason if res.timing else "",
            "ci": res.speedup_ci, "stages": dict(res.stage_seconds), "message": res.message,
            "compile": (res.protocol or {}).get("reference_compile"),
            "check_phases": (res.protocol or {}).get("check_phases"),
            "rounds_ahead": (res.protocol or {}).get("reference_rounds_ahead"),
            "warmup": (res.protocol or {}).get("runner_warmup_s"),
            "built_on": (res.protocol or {}).get("models_built_on")}


def kernelbench_eval(harness: Any, source: str, build_dir: str) -> dict[str, Any]:
    import re

    candidate = re.sub(r"\bModel\b", "ModelNew", source)
    started = time.perf_counter()
    try:
        res = harness(source, candidate, num_correct_trials=KB_CORRECT_TRIALS, num_perf_trials=KB_PERF_TRIALS,
                      measure_performance=True, build_dir=build_dir, backend="cuda")
    except Exception as exc:  # noqa: BLE001 - its failure is a row, not the end of the comparison
        return {"wall": time.perf_counter() - started, "status": f"error: {type(exc).__name__}: {exc}"[:120],
                "n": 0, "speedup": None}
    wall = time.perf_counter() - started
    ok = bool(getattr(res, "correctness", False)) if res is not None else False
    return {"wall": wall, "status": "ok" if ok else "fail", "n": KB_PERF_TRIALS,
            "speedup": (res.ref_runtime / res.runtime) if ok and getattr(res, "runtime", -1) > 0
            and getattr(res, "ref_runtime", -1) > 0 else None}


def _placeholders_for_llm_clients() -> None:
    """KernelBench's `utils` imports its LLM clients (openai, litellm, dotenv) at module level; its evaluation never
    calls them. Where they are not installed (a GPU machine with no network), empty stand-ins that fail if called
    let the harness import without them."""
    import importlib.util
    import types

    def refuse(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("an LLM client is not installed here (stand-in for the harness's import only)")

    def no_env_file(*_a: Any, **_k: Any) -> bool:  # called at import: there is no .env to load
        return False

    for module, names in {"dotenv": {"load_dotenv": no_env_file}, "openai": {"OpenAI": refuse},
                          "litellm": {"completion": refuse}}.items():
        if importlib.util.find_spec(module) is None:
            stand_in = types.ModuleType(module)
            for name, fn in names.items():
                setattr(stand_in, name, fn)
            sys.modules[module] = stand_in


def load_harness(folder: str | None, device: str) -> tuple[Any, str]:
    """KernelBench's `eval_kernel_against_ref`, or None and why it cannot run here."""
    if not device.startswith("cuda"):
        return None, "KernelBench's harness needs CUDA (device is cpu): workbench column only"
    if not folder:
        return None, "no --harness folder given: workbench column only"
    if not (Path(folder) / "kernelbench" / "eval.py").is_file():
        return None, f"{folder} holds no kernelbench/eval.py (give the src/ folder of a KernelBench checkout)"
    sys.path.insert(0, str(Path(folder).resolve()))
    _placeholders_for_llm_clients()
    try:
        from kernelbench.eval import eval_kernel_against_ref
    except Exception as exc:  # noqa: BLE001 - its imports (pydantic, requests) may be missing here
        return None, f"cannot import KernelBench's harness: {type(exc).__name__}: {exc}"
    return eval_kernel_against_ref, ""


def _stage_line(stages: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.2f}" for k, v in stages.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=str(DEFAULT_PROBLEMS))
    parser.add_argument("--harness", help="KernelBench's src/ folder (git-ignored copy)")
    parser.add_argument("--ids", default=DEFAULT_IDS, help=f"level/number pairs (default {DEFAULT_IDS})")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--fit", choices=["cpu"], help="shrink sizes (a CPU dry run of the workbench side)")
    args = parser.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu --fit cpu for the workbench side only")
        return 0
    if "/" not in args.ids:
        raise SystemExit(f"--ids takes level/number pairs like 1/19,2/6, not {args.ids!r}")
    levels = sorted({int(part.split("/")[0]) for part in args.ids.split(",") if part.strip()})
    chosen = [p for _, p in only_ids(problems(args.problems, levels), args.ids)]
    harness, why = load_harness(args.harness, args.device)
    if why:
        print(why)
    # Warm both sides on the first problem: the judge pool and fork server start once per session, and
    # KernelBench's process initializes CUDA once; neither belongs to a per-evaluation figure.
    print(f"warm-up on {chosen[0].name} ...", flush=True)
    workbench_eval(chosen[0], args.device, args.fit)
    build = tempfile.mkdtemp(prefix="kb_build_")
    if harness is not None:
        kernelbench_eval(harness, chosen[0].read_text(), build)
    rows = []
    for i, path in enumerate(chosen, 1):
        ours = workbench_eval(path, args.device, args.fit)
        theirs = kernelbench_eval(harness, path.read_text(), build) if harness is not None else None
        if harness is not None and args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        ratio = ours["wall"] / theirs["wall"] if theirs else None
        rows.append((path.name, ours, theirs, ratio))
        kb = (f" | kernelbench {theirs['wall']:.2f} s {theirs['status']} n={theirs['n']} -> ratio {ratio:.2f}"
              if theirs else "")
        print(f"[{i}/{len(chosen)}] {path.name}: workbench {ours['wall']:.2f} s {ours['status']} n={ours['n']} "
              f"({ours['stop']}){kb}\n    stages: {_stage_line(ours['stages'])}\n    reference compile: "
              f"{ours.get('compile')}; check phases: {ours.get('check_phases')}; reference rounds made during the "
              f"import: {ours.get('rounds_ahead')}; runner warm-up s: {ours.get('warmup')}; models built on: "
              f"{ours.get('built_on')}", flush=True)
    print("\nproblem                                   wb s    kb s   ratio  wb n  kb n")
    for name, ours, theirs, ratio in rows:
        kb_s = f"{theirs['wall']:7.2f}" if theirs else "      -"
        kb_n = f"{theirs['n']:5d}" if theirs else "    -"
        print(f"{name[:40]:40s} {ours['wall']:7.2f} {kb_s} {ratio if ratio else float('nan'):7.2f} "
              f"{ours['n']:5d} {kb_n}")
    ratios = [r for *_, r in rows if r]
    if ratios:
        med = statistics.median(ratios)
        print(f"median workbench / KernelBench wall time: {med:.2f} (target <= 0.5): "
              f"{'met' if med <= 0.5 else 'NOT met'}")
    totals: dict[str, float] = {}
    for _, ours, _, _ in rows:
        for k, v in ours["stages"].items():
            totals[k] = totals.get(k, 0.0) + v
    print("workbench seconds by stage over all problems: " + _stage_line(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
