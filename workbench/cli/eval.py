"""`kwb eval FILE --task T`: check and time one candidate file, print the verdict, optionally store it.

Everything the user typed is checked here, in the caller, before a worker starts (see common.py): the
candidate file must be text, the task must exist, every size name must be one of the task's and every value
of the right type.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench import languages
from workbench.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_size,
    datasheet_gpu,
    device_arg,
    open_store,
    parse_size,
    positive,
    read_text_file,
)
from workbench.cli.format import Progress, format_result
from workbench.tasks.sizes import size_label


def load_task_arg(spec: str, sizes: str | None = None, fit: str | None = None, *, level: int | None = None,
                  policy: str | None = None, precision: str | None = None):
    """A registered task name, or a KernelBench file path (with optional `sizes` overrides, a `fit` and its `level`);
    `policy` and `precision` override the task's kernel and precision policies."""
    import dataclasses

    import workbench

    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        source = read_text_file(path, "KernelBench file")
        overrides = parse_size(sizes) if sizes else None
        if isinstance(overrides, str):
            raise UsageError("--sizes takes NAME=VALUE pairs (module constants of the file), not a preset name")
        if overrides:
            from workbench.tasks.task import Task

            check_size(Task(name=path.stem, source=source), overrides, option="--sizes")
        return workbench.load_kernelbench(path, sizes=overrides or None, fit=fit, level=level, kernel_policy=policy,
                                          precision=precision)
    if fit:
        raise UsageError("--fit applies to KernelBench files; a registered task has its own cpu preset")
    if sizes:
        raise UsageError("--sizes applies to KernelBench files; for a registered task use --size NAME=VALUE,...")
    if level is not None:
        raise UsageError("--level applies to KernelBench files (it sets their default kernel policy); for a registered "
                         "task use --policy")
    task = workbench.get_task(spec)
    changes = {k: v for k, v in (("kernel_policy", policy), ("precision", precision)) if v is not None}
    return dataclasses.replace(task, **changes) if changes else task


def load_candidate(path: str, language: str | None):
    """The candidate in `path`, refused with a usage error when it is missing, a folder or not text."""
    from workbench.candidate import Candidate

    source = read_text_file(path, "candidate file")
    return Candidate(source=source, language=language, name=Path(path).stem)


def cmd_eval(args: argparse.Namespace) -> int:
    from workbench.eval.evaluate import default_device, evaluate
    from workbench.eval.options import EvalOptions

    task = load_task_arg(args.task, args.sizes, args.fit, level=args.level, policy=args.policy,
                         precision=args.precision)
    candidate = load_candidate(args.file, args.language)
    device = args.device or default_device()
    size = parse_size(args.size)
    check_size(task, size)
    if not task.sizes and size is None and device == "cpu" and not args.fit:
        print("note: no --sizes given: the file's own sizes are used; KernelBench sizes can take minutes on a CPU",
              file=sys.stderr)
    # The size that runs, every name of it: a partial --size keeps the device's preset for the rest.
    full = task.size(size, device)
    runtime = languages.get(candidate.language or "torch").cpu_runtime
    mode = f" ({runtime})" if device == "cpu" and runtime else ""
    shown = size_label(full, None if "dtype" in full else (task.dtypes[0] if task.dtypes else None))
    with Progress(f"evaluating {args.file} on task {task.name} ({shown or 'the file defaults'}), {device}{mode}",
                  verbose=args.verbose) as line:
        options = EvalOptions(device=device, size=size, seed=args.seed, rounds=args.rounds, timeout=args.timeout,
                              time_it=not args.no_time, compile_timeout=args.compile_timeout, on_progress=line.update)
        result = evaluate(task, candidate, options=options)
    stored = None
    if args.store:
        with open_store(args.store) as store:
            row = store.add(result, run_id=args.run_id, command="kwb eval")
        stored = f"{args.store} (row {row})"
    if args.json:
        data = result.to_dict()
        data.pop("source", None)
        print(json.dumps(data, indent=2, default=str))
    else:
        print(format_result(result, stored, projection_gpu=args.gpu))
    return EXIT_OK if result.ok else EXIT_FAILED


def _precision_names() -> list[str]:
    from workbench.tasks.precision import precisions

    return precisions()


def add_eval_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate one candidate file on one task",
                       description="Check a candidate for correctness and cheating, time it, print a result table. "
                                   "Exit 0 if ok, 1 if the candidate failed, 2 on usage errors.")
    p.add_argument("file", help="candidate source (.py defining ModelNew)")
    p.add_argument("--task", required=True, help="registered task name (`kwb tasks`) or a KernelBench .py file")
    p.add_argument("--sizes", help="KernelBench file only: override its module constants, e.g. batch_size=16,dim=256")
    p.add_argument("--fit", choices=["cpu"], help="KernelBench file only: shrink every size constant for a CPU run")
    p.add_argument("--level", type=positive(int),
                   help="KernelBench file only: its level (default: from a levelN folder in the path), which sets "
                        "the kernel policy: strict for level 1, partial above")
    p.add_argument("--policy", choices=["strict", "partial"],
                   help="kernel policy: strict (every FLOP in the candidate's own kernels) or partial (library calls "
                        "allowed, judged by coverage); default: the task's")
    p.add_argument("--precision", choices=_precision_names(),
                   help="precision policy for reference and candidate alike: ieee (no TF32) or tf32, ...; "
                        "default: the task's")
    p.add_argument("--size", help="size preset (cpu, gpu) or NAME=VALUE,... (default: the device's preset)")
    p.add_argument("--device", type=device_arg, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--language", choices=list(languages.names()), help="override the inferred language")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=positive(int), default=5, help="correctness rounds, each with fresh inputs")
    p.add_argument("--timeout", type=positive(float), help="seconds the candidate may take for any one step")
    p.add_argument("--compile-timeout", type=positive(float),
                   help="seconds for loading the candidate, CUDA compilation included (default 600)")
    p.add_argument("--no-time", action="store_true", help="check correctness only, skip timing")
    p.add_argument("--store", help="also add the result to this results store (SQLite file)")
    p.add_argument("--run-id", help="run id to store the result under")
    p.add_argument("--gpu", type=datasheet_gpu, default=None,
                   help="datasheet GPU a result without a measured SOL is projected on (default: H100 SXM)")
    p.add_argument("--json", action="store_true", help="print the Result as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print each stage of the evaluation (a terminal shows them live on one line anyway)")
    p.set_defaults(handler=cmd_eval)
