"""`kwb`: the workbench from a shell. tasks, eval, demo, results, doctor, flags; study and ceilings plug in.

Exit codes: 0 success, 1 a candidate (or a demo expectation) failed, 2 usage error (bad arguments, unknown
task, unreadable file), 3 the workbench itself failed (worker could not start, store unusable).

Other packages add subcommands without editing this file: a hook is a function `add(subparsers)` that calls
`subparsers.add_parser(...)` and sets `handler=` (a function `args -> int`) with `set_defaults`. Hooks are
listed in `COMMAND_HOOKS` ("module:function") or declared by third parties as entry points in the group
`kwb.commands`. A hook whose module is not installed is skipped.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workbench.errors import StoreError, UnknownNameError, WorkbenchError

#: Subcommand hooks in optional modules, (command, "module:function"): study runs and roofline ceilings.
COMMAND_HOOKS: list[tuple[str, str]] = [
    ("study", "workbench.study.run:add_study_commands"),
    ("ceilings", "roofline.cli:add_ceilings_commands"),
]

#: A candidate that lets PyTorch do all the work: the demo shows it being rejected.
CHEAT_SOFTMAX = '''"""Submitted as a Triton kernel, but torch.softmax does the work: no kernel of its own."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(WorkbenchError):
    """Bad command-line input; exits with status 2."""


# ---- small text helpers -----------------------------------------------------------------------------------

def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], max_width: int = 60) -> str:
    """A plain-text table; long cells are cut at `max_width` so a row stays on one terminal line."""
    def cell(v: Any) -> str:
        text = "" if v is None else str(v).replace("\n", " ")
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    cells = [[cell(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_size(text: str | None) -> str | dict[str, Any] | None:
    """"cpu"/"gpu" stay preset names; "batch_size=16,dim=256" becomes a dict with numbers parsed."""
    if text is None or text in ("cpu", "gpu"):
        return text
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"bad size {part!r}: write NAME=VALUE pairs separated by commas, e.g. batch_size=16,dim=256")
        out[key.strip()] = _parse_value(value.strip())
    return out


def _parse_value(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _size_text(size: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (size or {}).items()) or "(file defaults)"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def time_text(result) -> str:
    """Median with the half-width of its 95% CI and the clock that measured it."""
    t = result.timing
    if t is None:
        return "-"
    half = max(t.median_ms - t.ci95_low_ms, t.ci95_high_ms - t.median_ms)
    return f"{t.median_ms:.4g} ms ± {half:.2g} (95% CI {t.ci95_low_ms:.4g}-{t.ci95_high_ms:.4g}, {t.clock}, n={t.n})"


def speedup_text(result) -> str:
    if result.speedup is not None:
        text = f"{result.speedup:.2f}x vs eager"
        if result.speedup_vs_compile is not None:
            text += f", {result.speedup_vs_compile:.2f}x vs torch.compile"
        return text
    if result.timing is not None and result.timing.clock == "interpreter":
        return "n/a (interpreter)"
    return "n/a"


def sol_text(result) -> str:
    if result.sol_fraction is None:
        return "-"
    return f"{100 * result.sol_fraction:.1f}%" + (f" ({result.bound}-bound)" if result.bound else "")


def format_result(result, stored: str | None = None) -> str:
    """The `kwb eval` report of one Result."""
    errors = "-"
    if result.max_abs_err is not None or result.max_rel_err is not None:
        errors = "  ".join(f"{name} {'-' if v is None else format(v, '.3g')}"
                           for name, v in (("abs", result.max_abs_err), ("rel", result.max_rel_err)))
    ref = result.reference_timing
    rows = [
        ("task", f"{result.task} ({_size_text(result.size)}{', ' + result.dtype if result.dtype else ''})"),
        ("candidate", f"{result.candidate_name} ({result.language}, id {result.candidate_id[:8]})"),
        ("device", f"{result.device}: {result.device_name}" if result.device_name else result.device),
        ("status", result.status),
        ("flags", ", ".join(result.flags) or "-"),
        ("max error", errors),
        ("time", time_text(result)),
        ("reference", f"{ref.median_ms:.4g} ms ({ref.clock})" if ref else "-"),
        ("speedup", speedup_text(result)),
    ]
    if result.sol_fraction is not None:
        rows.append(("SOL", sol_text(result)))
    if result.warnings:
        rows.append(("warnings", "; ".join(result.warnings)))
    if stored:
        rows.append(("stored", stored))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if result.message:
        lines.append(f"{'message'.ljust(width)}  " + result.message.replace("\n", "\n" + " " * (width + 2)))
    return "\n".join(lines)


class Progress:
    """One status line on stderr with elapsed seconds, refreshed in place on a terminal."""

    def __init__(self, text: str, stream=None):
        self.text, self.stream = text, stream or sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = 0.0

    def __enter__(self) -> Progress:
        self.started = time.perf_counter()
        if self.stream.isatty():
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
        else:
            print(f"{self.text} ...", file=self.stream, flush=True)
        return self

    def _spin(self) -> None:
        while not self._stop.wait(0.5):
            print(f"\r{self.text} ... {time.perf_counter() - self.started:.0f} s", end="", file=self.stream, flush=True)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        end = "\r" if self._thread else ""
        print(f"{end}{self.text} ... done in {time.perf_counter() - self.started:.1f} s", file=self.stream, flush=True)


def _open_store(path: str, create: bool = True):
    from workbench.store import Store

    if not create and not Path(path).exists():
        raise UsageError(f"no results store at {path}; create one with `kwb eval ... --store {path}` or `kwb demo`")
    return Store(path)


# ---- subcommands -------------------------------------------------------------------------------------------

def cmd_tasks(args: argparse.Namespace) -> int:
    import workbench

    names = workbench.tasks()
    if not names:
        print("no tasks registered")
        return EXIT_OK
    rows, records = [], []
    for name in names:
        task = workbench.get_task(name)
        cpu, gpu = task.sizes.get("cpu"), task.sizes.get("gpu")
        rows.append((name, ",".join(task.dtypes), _size_text(cpu) if cpu else "-", _size_text(gpu) if gpu else "-",
                     task.description))
        records.append({"name": name, "dtypes": list(task.dtypes), "cpu": cpu, "gpu": gpu,
                        "description": task.description, "has_solution": bool(task.solution)})
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        print(format_table(rows, ["name", "dtypes", "cpu size", "gpu size", "description"], max_width=48))
    return EXIT_OK


def load_task_arg(spec: str, sizes: str | None = None, fit: str | None = None):
    """A registered task name, or a KernelBench file path (with optional `sizes` overrides and a `fit`)."""
    import workbench

    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        if not path.is_file():
            raise UsageError(f"KernelBench file {spec} does not exist")
        overrides = parse_size(sizes) if sizes else None
        if isinstance(overrides, str):
            raise UsageError("--sizes takes NAME=VALUE pairs (module constants of the file), not a preset name")
        return workbench.load_kernelbench(path, sizes=overrides or None, fit=fit)
    if fit:
        raise UsageError("--fit applies to KernelBench files; a registered task has its own cpu preset")
    if sizes:
        raise UsageError("--sizes applies to KernelBench files; for a registered task use --size NAME=VALUE,...")
    return workbench.get_task(spec)


def _device_arg(value: str) -> str:
    if value == "cpu" or value == "cuda" or value.startswith("cuda:"):
        return value
    raise argparse.ArgumentTypeError(f"device must be cpu, cuda or cuda:N, not {value!r}")


def cmd_eval(args: argparse.Namespace) -> int:
    from workbench.candidate import Candidate
    from workbench.eval.evaluate import default_device, evaluate

    task = load_task_arg(args.task, args.sizes, args.fit)
    candidate = Candidate.from_file(args.file, language=args.language)
    device = args.device or default_device()
    size = parse_size(args.size)
    if not task.sizes and size is None and device == "cpu":
        print("note: no --sizes given: the file's own sizes are used; KernelBench sizes can take minutes on a CPU",
              file=sys.stderr)
    mode = " (Triton interpreter)" if device == "cpu" and candidate.language == "triton" else ""
    with Progress(f"evaluating {args.file} on task {task.name}, {device}{mode}"):
        result = evaluate(task, candidate, device, size=size, seed=args.seed, rounds=args.rounds,
                          timeout=args.timeout, time_it=not args.no_time)
    stored = None
    if args.store:
        with _open_store(args.store) as store:
            row = store.add(result, run_id=args.run_id, command="kwb eval")
        stored = f"{args.store} (row {row})"
    if args.json:
        data = result.to_dict()
        data.pop("source", None)
        print(json.dumps(data, indent=2, default=str))
    else:
        print(format_result(result, stored))
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_doctor(args: argparse.Namespace) -> int:
    from workbench.cli.doctor import format_report, report

    data = report()
    print(json.dumps(data, indent=2) if args.json else format_report(data))
    return EXIT_OK


def cmd_flags(args: argparse.Namespace) -> int:
    from workbench.eval.findings import flag_table_markdown

    print(flag_table_markdown())
    return EXIT_OK


def run_demo(device: str | None = None, store_path: str = "demo.db", task_names: Sequence[str] | None = None,
             run_id: str | None = None, progress: bool = True) -> tuple[list[tuple[Any, str]], str]:
    """The main job on the default device: each built-in task's reference Triton solution, plus one cheating
    candidate that must be rejected. Returns ([(result, expected status)], run id); results go to the store."""
    import workbench
    from workbench.candidate import Candidate
    from workbench.eval.evaluate import default_device, evaluate

    device = device or default_device()
    names = list(task_names) if task_names else [n for n in workbench.tasks() if workbench.get_task(n).solution]
    run_id = run_id or f"demo-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    jobs: list[tuple[Any, Any, str]] = [(workbench.get_task(n), None, "ok") for n in names]
    if "softmax" in names:
        jobs.append((workbench.get_task("softmax"),
                     Candidate(source=CHEAT_SOFTMAX, language="triton", name="softmax-torch-cheat"), "rejected"))
    out = []
    with _open_store(store_path) as store:
        for i, (task, cand, expected) in enumerate(jobs, 1):
            cand = cand or task.solution_candidate()
            label = f"[{i}/{len(jobs)}] {task.name}: {cand.name}"
            started = time.perf_counter()
            if progress:
                print(f"{label} ...", file=sys.stderr, flush=True)
            result = evaluate(task, cand, device)
            store.add(result, run_id=run_id, command="kwb demo", expected=expected)
            out.append((result, expected))
            if progress:
                mark = "as expected" if result.status == expected else f"EXPECTED {expected}"
                print(f"{label}: {result.status} {_ms(result.time_ms)} ({mark}, {time.perf_counter() - started:.1f} s)",
                      file=sys.stderr, flush=True)
    return out, run_id


def cmd_demo(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.tasks.split(",") if n.strip()] if args.tasks else None
    if names:
        import workbench

        for n in names:
            workbench.get_task(n)  # unknown names fail before any work, listing the known ones
    started = time.perf_counter()
    results, run_id = run_demo(args.device, args.store, names)
    rows = []
    for res, expected in results:
        clock = res.timing.clock if res.timing else "-"
        rows.append((res.task, res.candidate_name, res.status, ",".join(res.flags) or "-", _ms(res.time_ms), clock,
                     speedup_text(res), sol_text(res), "yes" if res.status == expected else f"NO (expected {expected})"))
    print(format_table(rows, ["task", "candidate", "status", "flags", "time", "clock", "speedup", "SOL", "as expected"]))
    surprises = [r for r, e in results if r.status != e]
    if not args.no_report:
        report = args.report or str(Path(args.store).with_name(Path(args.store).stem + "-report.html"))
        print(write_demo_report(args.store, run_id, report))
    print(f"\n{len(results)} evaluations in {time.perf_counter() - started:.0f} s; results in {Path(args.store).resolve()} "
          f"(run {run_id}); see them with `kwb results --store {args.store} --run {run_id}`")
    for res in surprises:
        print(f"\n{res.task}/{res.candidate_name}: {res.status}\n{res.message}", file=sys.stderr)
    return EXIT_FAILED if surprises else EXIT_OK


def write_demo_report(store_path: str, run_id: str, output: str) -> str:
    """The run's self-contained HTML report when the lab extra (plotly) is installed; otherwise how to get it."""
    import importlib

    try:
        write_report = importlib.import_module("widgets.report").write_report
        return f"HTML report: {Path(write_report(store_path, run_id, output)).resolve()}"
    except ImportError as exc:  # MissingDependencyError is an ImportError too
        return f"HTML report skipped ({exc}); `kwb doctor` lists what to install"


RESULT_COLUMNS = ["id", "run_id", "task", "candidate_name", "status", "flags", "size", "device", "time_median_ms",
                  "clock", "ref_median_ms", "speedup", "sol_fraction"]


def cmd_results(args: argparse.Namespace) -> int:
    with _open_store(args.store, create=False) as store:
        frame = store.frame(task=args.task, status=args.status, run_id=args.run, source=False)
    if args.json:
        print(json.dumps(json.loads(frame.to_json(orient="records")), indent=2))  # NaN -> null
        return EXIT_OK
    if frame.empty:
        print(f"no results in {args.store}" + (" matching the filters" if args.task or args.status or args.run else ""))
        return EXIT_OK
    view = frame[RESULT_COLUMNS].tail(args.limit).copy()
    view["flags"] = view["flags"].map(lambda f: ",".join(f) or "-")
    view["size"] = view["size"].map(_size_text)
    rows = [[("-" if _missing(v) else (f"{v:.4g}" if isinstance(v, float) else v)) for v in row]
            for row in view.itertuples(index=False)]
    print(format_table(rows, RESULT_COLUMNS, max_width=40))
    if len(frame) > args.limit:
        print(f"({len(frame) - args.limit} earlier rows not shown; --limit N shows more)")
    return EXIT_OK


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


# ---- parser and hooks --------------------------------------------------------------------------------------

def _add_builtin_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list the registered tasks")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=cmd_tasks)

    p = sub.add_parser("eval", help="evaluate one candidate file on one task",
                       description="Check a candidate for correctness and cheating, time it, print a result table. "
                                   "Exit 0 if ok, 1 if the candidate failed, 2 on usage errors.")
    p.add_argument("file", help="candidate source (.py defining ModelNew)")
    p.add_argument("--task", required=True, help="registered task name (`kwb tasks`) or a KernelBench .py file")
    p.add_argument("--sizes", help="KernelBench file only: override its module constants, e.g. batch_size=16,dim=256")
    p.add_argument("--fit", choices=["cpu"], help="KernelBench file only: shrink every size constant for a CPU run")
    p.add_argument("--size", help="size preset (cpu, gpu) or NAME=VALUE,... (default: the device's preset)")
    p.add_argument("--device", type=_device_arg, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--language", choices=["triton", "cuda", "torch"], help="override the inferred language")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=5, help="correctness rounds, each with fresh inputs")
    p.add_argument("--timeout", type=float, help="seconds for the whole evaluation")
    p.add_argument("--no-time", action="store_true", help="check correctness only, skip timing")
    p.add_argument("--store", help="also add the result to this results store (SQLite file)")
    p.add_argument("--run-id", help="run id to store the result under")
    p.add_argument("--json", action="store_true", help="print the Result as JSON")
    p.set_defaults(handler=cmd_eval)

    p = sub.add_parser("demo", help="evaluate every built-in task's reference solution and one cheat")
    p.add_argument("--device", type=_device_arg, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--store", default="demo.db", help="results store to write (default demo.db)")
    p.add_argument("--tasks", help="comma-separated task names (default: every task with a solution)")
    p.add_argument("--report", help="HTML report file (default: beside the store, STORE-report.html)")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("results", help="show what a results store holds")
    p.add_argument("--store", default="results.db")
    p.add_argument("--task")
    p.add_argument("--status")
    p.add_argument("--run", help="only this run id")
    p.add_argument("--limit", type=int, default=50, help="show the last N rows (default 50)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_results)

    p = sub.add_parser("doctor", help="versions, device, interpreter mode, what is missing and how to get it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_doctor)

    p = sub.add_parser("flags", help="the catalog of check flags (markdown table)")
    p.set_defaults(handler=cmd_flags)


def _load_hook(command: str, spec: str) -> Callable[[argparse._SubParsersAction], None] | None:
    """The hook function, a stand-in command explaining what is missing, or None if the module is absent."""
    import importlib

    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is None or module_name == exc.name or module_name.startswith(exc.name + "."):
            return None  # the plug-in itself is not installed: no command
        return _unavailable(command, f"{module_name} needs {exc.name!r}, which is not installed ({exc})")
    hook = getattr(module, attr, None)
    if hook is None and module_name == "roofline.cli" and hasattr(module, "ceilings_command"):
        return _ceilings_fallback(module.ceilings_command)
    return hook


def _unavailable(command: str, why: str):
    """A placeholder subcommand: `kwb COMMAND` says which dependency is missing instead of "invalid choice"."""
    def add(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser(command, help=f"(unavailable: {why})", add_help=False)

        def handler(args: argparse.Namespace) -> int:
            print(f"kwb {command} is unavailable: {why}. `kwb doctor` shows how to install what is missing.",
                  file=sys.stderr)
            return EXIT_USAGE

        p.set_defaults(handler=handler, takes_any_arguments=True)

    return add


def _ceilings_fallback(command: Callable[[argparse.Namespace], int | None]):
    """`kwb ceilings` for a roofline.cli that offers only `ceilings_command(args)`."""
    def add(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser("ceilings", help="measure or show this device's roofline ceilings")
        p.add_argument("--device", type=_device_arg)
        p.add_argument("--refresh", action="store_true", help="measure again instead of using the cache")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=lambda args: command(args) or 0)

    return add


def _entry_point_hooks() -> list[Callable]:
    from importlib.metadata import entry_points

    try:
        eps = entry_points(group="kwb.commands")
    except Exception:  # pragma: no cover - broken metadata must not break the CLI
        return []
    hooks = []
    for ep in eps:
        try:
            hooks.append(ep.load())
        except Exception as exc:
            _warn(f"commands from entry point {ep.name} unavailable: {exc}")
    return hooks


def _warn(text: str) -> None:
    print(f"kwb: {text}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kwb", description="Kernel Workbench: check, time and compare GPU kernels (Triton, CUDA, PyTorch).",
        epilog="Exit codes: 0 ok, 1 a candidate failed, 2 usage error, 3 the workbench failed.")
    from workbench import __version__

    parser.add_argument("--version", action="version", version=f"kernel-workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_builtin_commands(sub)
    hooks = [h for h in (_load_hook(c, s) for c, s in COMMAND_HOOKS) if h] + _entry_point_hooks()
    for hook in hooks:
        try:
            hook(sub)
        except Exception as exc:  # one broken plug-in must not take the other commands down
            _warn(f"could not add commands from {getattr(hook, '__module__', hook)}: {exc}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code = handler(args)
    except (UsageError, UnknownNameError, FileNotFoundError) as exc:
        print(f"kwb {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as exc:
        print(f"kwb {args.command}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except WorkbenchError as exc:
        from workbench.errors import CandidateError, TaskError

        print(f"kwb {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (TaskError, CandidateError)) else EXIT_INTERNAL
    except KeyboardInterrupt:
        print(f"kwb {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kwb flags | head`: the reader left; not an error worth a traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
