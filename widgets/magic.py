"""The `%%kwb` cell magic: a notebook cell is the kernel, running the cell evaluates it.

    %load_ext widgets

    %%kwb softmax --device cpu --name my-softmax --size batch_size=64,dim=256 --store results.db
    import torch, triton, triton.language as tl
    ...
    class ModelNew(torch.nn.Module): ...

The cell is written in JupyterLab's own editor (highlighting, line numbers, completion). Running it hands the
cell's text to `workbench.evaluate`, which runs it in a worker process, never in the notebook's, and shows the
verdict card below the cell. The candidate's source is the cell with the `%%kwb` line kept as a comment, so
line numbers in findings and tracebacks are the cell's own. The last Result is bound to `_kwb` in the
notebook. Bad arguments end with a one-line message that says what to write instead, never a traceback.
"""

from __future__ import annotations

import ast
import dataclasses
import shlex
from dataclasses import dataclass, field
from typing import Any

from widgets._runner import discard_judge
from widgets.static import StaticMixin
from widgets.verdict import result_html, state_html
from workbench.candidate import LANGUAGES, Candidate
from workbench.errors import WorkbenchError, require
from workbench.result import Result
from workbench.tasks.precision import precisions
from workbench.tasks.sizes import SizeError, size_label, split_pairs, validate_size
from workbench.tasks.task import KERNEL_POLICIES

w = require("ipywidgets", "lab", "the %%kwb cell magic")

USAGE = (f"%%kwb TASK [--device cpu|cuda|cuda:N] [--name NAME] [--language auto|{'|'.join(LANGUAGES)}] "
         "[--size k=v,k=v | PRESET] [--store PATH] [--timeout SECONDS] [--precision ieee|tf32|...] "
         "[--policy strict|partial]")
#: Line 1 of every candidate from a cell: stands for the `%%kwb` line, so candidate line N is cell line N.
HEADER = "# %%kwb cell\n"
_OPTIONS = ("device", "name", "language", "size", "store", "timeout", "precision", "policy")


class MagicUsageError(WorkbenchError):
    """A bad `%%kwb` line or cell; the message says what to write instead."""


@dataclass
class MagicArgs:
    task: str
    device: str | None = None
    name: str = ""
    language: str = "auto"
    size: str | dict[str, Any] | None = None
    store: str | None = None
    timeout: float | None = None
    #: The task's precision and kernel policies for this cell (None: the task's own).
    precision: str | None = None
    policy: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_size(text: str) -> str | dict[str, Any]:
    """"batch_size=64,dim=256,dtype=float16" -> {"batch_size": 64, "dim": 256, "dtype": "float16"}; a bare word
    is a size preset name ("cpu", "gpu")."""
    if "=" not in text:
        if not text.isidentifier():
            raise MagicUsageError(f"--size {text!r}: write k=v pairs like --size batch_size=64,dim=256, or a preset")
        return text
    size: dict[str, Any] = {}
    for part in split_pairs(text):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.isidentifier() or not value:
            raise MagicUsageError(f"--size: {part!r} is not k=v; write e.g. --size batch_size=64,dim=256")
        try:
            size[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            size[key] = value  # a dtype name such as float16
    return size


def parse_line(line: str) -> MagicArgs:
    """The `%%kwb` line's arguments; MagicUsageError (with the usage) for anything else."""
    try:
        tokens = shlex.split(line)
    except ValueError as exc:
        raise MagicUsageError(f"cannot read the %%kwb line ({exc}); usage: {USAGE}") from exc
    values: dict[str, str] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            key, eq, value = token[2:].partition("=")
            if key not in _OPTIONS:
                raise MagicUsageError(f"unknown option --{key}; options: {', '.join('--' + o for o in _OPTIONS)}. "
                                      f"Usage: {USAGE}")
            if not eq:
                if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                    raise MagicUsageError(f"--{key} needs a value; usage: {USAGE}")
                value, i = tokens[i + 1], i + 1
            values[key] = value
        else:
            positional.append(token)
        i += 1
    if len(positional) != 1:
        what = "no task" if not positional else f"{len(positional)} tasks ({' '.join(positional)})"
        raise MagicUsageError(f"%%kwb needs exactly one task name, got {what}; usage: {USAGE}")
    args = MagicArgs(task=positional[0], device=values.get("device"), name=values.get("name", ""),
                     language=values.get("language", "auto"), store=values.get("store"))
    if args.language not in ("auto", *LANGUAGES):
        raise MagicUsageError(f"--language {args.language!r}: choose auto, {', '.join(LANGUAGES)}")
    if args.device is not None and not args.device.startswith(("cpu", "cuda")):
        raise MagicUsageError(f"--device {args.device!r}: use cpu, cuda or cuda:N")
    args.precision, args.policy = values.get("precision"), values.get("policy")
    if args.precision is not None and args.precision not in precisions():
        raise MagicUsageError(f"--precision {args.precision!r}: choose one of {', '.join(precisions())}")
    if args.policy is not None and args.policy not in KERNEL_POLICIES:
        raise MagicUsageError(f"--policy {args.policy!r}: choose one of {', '.join(KERNEL_POLICIES)}")
    if "size" in values:
        args.size = parse_size(values["size"])
    if "timeout" in values:
        try:
            args.timeout = float(values["timeout"])
        except ValueError:
            raise MagicUsageError(f"--timeout {values['timeout']!r}: give seconds, e.g. --timeout 120") from None
        if args.timeout <= 0:
            raise MagicUsageError("--timeout must be positive (seconds)")
    return args


def check_size(task: Any, size: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """The full size the cell runs (a partial one keeps the device's preset for the rest), or None for the device's
    preset; a preset the task lacks or a value it cannot use is a one-line MagicUsageError."""
    if size is None:
        return None
    if isinstance(size, str):
        if task.sizes and size not in task.sizes:
            example = ",".join(f"{k}={v}" for k, v in task.size(None).items() if k != "dtype")
            raise MagicUsageError(f"--size {size}: {task.name} has the presets {', '.join(task.sizes)}; or give "
                                  f"k=v pairs such as --size {example}")
        return None
    try:
        validate_size(task, size)
    except SizeError as exc:
        raise MagicUsageError(exc.message("--size")) from None
    return size


def cell_candidate(cell: str, args: MagicArgs) -> Candidate:
    """The cell as a candidate: the `%%kwb` line becomes a comment so line numbers match the cell's."""
    if not cell.strip():
        raise MagicUsageError("the cell is empty: write the kernel (a ModelNew class) below the %%kwb line")
    language = None if args.language == "auto" else args.language  # inferred torch is judged by the kernel policy
    return Candidate(source=HEADER + cell, language=language, name=args.name or None,
                     metadata={"origin": "%%kwb cell"})


class CellFigure(StaticMixin, w.Box):
    """The heatmap under a `%%kwb` card, displayed once and never redrawn: the card is redisplayed at every stage (its
    HTML fallback is what a saved notebook keeps), and a plot inside a redisplayed widget is resized by JupyterLab
    in views already gone ("Resize must be passed a displayed plot div element"). Its own fallback is empty: the
    card's already holds the heatmap."""

    _static_title = "Kernel Workbench: error heatmap"

    def __init__(self, fig: Any):
        from widgets._plot import PLOT_CONFIG, plotly_output

        out = w.Output(layout=w.Layout(width="100%"))
        out.add_class("kwb-figure")
        out.outputs = (plotly_output(fig, {**PLOT_CONFIG, "responsive": False}),)
        self.fig = fig
        super().__init__(children=[out], layout=w.Layout(width="100%"))
        self.add_class("kwb-cell-figure")

    def _static_parts(self) -> list[Any]:
        return []


class CellVerdict(StaticMixin, w.VBox):
    """The card under a `%%kwb` cell: its state while running, then the verdict (the error heatmap, live, is a display
    of its own below it: `CellFigure`). Renders as HTML where widgets do not (nbconvert, papermill output), the
    heatmap included."""

    _static_title = "Kernel Workbench: cell verdict"

    def __init__(self, what: str = "", **kwargs: Any):
        self.result: Result | None = None
        self._state = state_html("running", f"evaluating {what + ' ' if what else ''}in a judge process: compile, "
                                            "check, time…")
        self._panel = w.HTML(self._state)
        self._panel.add_class("kwb-result-panel")
        super().__init__(children=[self._panel], **kwargs)
        self.add_class("kwb-cell-verdict")

    def state(self, state: str, text: str) -> None:
        self._state = state_html(state, text)
        self._panel.value = self._state

    def show(self, result: Result) -> None:
        self.result = result
        self._panel.value = result_html(result, where="cell line")

    def figure(self) -> CellFigure | None:
        """The error heatmap of a numerically wrong result, as a display of its own (None when there is none)."""
        from widgets.error_map import error_heatmap

        fig = error_heatmap(self.result) if self.result is not None and self.result.status != "ok" else None
        return CellFigure(fig) if fig is not None else None

    def _static_parts(self) -> list[Any]:
        from widgets.error_map import error_heatmap

        if self.result is None:
            return [self._state]
        return [result_html(self.result, where="cell line"), error_heatmap(self.result)]


def run_cell(line: str, cell: str, display: Any = None, user_ns: dict[str, Any] | None = None) -> Result | None:
    """What `%%kwb` does, callable without IPython: parse, show the card, evaluate, store, bind `_kwb`."""
    from workbench import EvalOptions, evaluate
    from workbench.tasks.task import get_task

    args = parse_line(line)
    try:
        task = get_task(args.task)
    except WorkbenchError as exc:
        raise MagicUsageError(str(exc)) from None
    changes = {k: v for k, v in (("precision", args.precision), ("kernel_policy", args.policy)) if v is not None}
    if changes:
        task = dataclasses.replace(task, **changes)  # a copy: the registered task stays as it is
    check_size(task, args.size)
    candidate = cell_candidate(cell, args)
    full = task.size(args.size, args.device or _default_device())
    store = None
    if args.store:
        from workbench.store import Store

        try:
            store = Store(args.store)
        except (WorkbenchError, OSError) as exc:
            raise MagicUsageError(f"--store {args.store!r}: {exc}") from None
    dtype = None if "dtype" in full else (task.dtypes[0] if task.dtypes else None)
    what = f"{task.name} ({size_label(full, dtype) or 'the file defaults'})"
    card = CellVerdict(what)
    handle = display(card, display_id=True) if display is not None else None

    def refresh() -> None:
        # The live widget updates itself; re-sending the output refreshes its HTML fallback too, which is what
        # papermill and nbconvert keep (else a saved notebook would say "running" forever).
        if hasattr(handle, "update"):
            handle.update(card)

    shown_stage = [""]

    def stage(progress: Any) -> None:
        # The card says where the evaluation stands; the saved output is refreshed only when the stage changes.
        card.state("running", f"evaluating {what} in a judge process: {progress.describe()}")
        if progress.stage != shown_stage[0]:
            shown_stage[0] = progress.stage
            refresh()

    options = EvalOptions(device=args.device, size=args.size, timeout=args.timeout, on_progress=stage)
    try:
        result = evaluate(task, candidate, options=options)
    except KeyboardInterrupt:
        discard_judge(args.device or _default_device())
        card.state("cancelled", "interrupted: the worker was stopped; run the cell again for a fresh one")
        refresh()
        return None
    except WorkbenchError as exc:  # the caller's mistake (no GPU, unknown size preset): say what to do
        card.state("error", str(exc))
        refresh()
        return None
    card.show(result)
    refresh()  # the saved output (HTML fallback) has the verdict and the heatmap from here on
    figure = card.figure()
    if figure is not None and display is not None:
        display(figure)  # live, below the card (`CellFigure`)
    if store is not None:
        store.add(result)
    if user_ns is not None:
        user_ns["_kwb"] = result
    return result


def _default_device() -> str:
    from workbench.eval.evaluate import default_device

    return default_device()


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext widgets`: registers the `%%kwb` cell magic."""
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, cell_magic, magics_class
    from IPython.display import display

    @magics_class
    class KwbMagics(Magics):
        @cell_magic
        def kwb(self, line: str, cell: str) -> None:
            """Evaluate this cell as a kernel for a task: %%kwb TASK [--device ...] [--name ...] [--size k=v,...]"""
            try:
                run_cell(line, cell, display=display, user_ns=self.shell.user_ns)
            except MagicUsageError as exc:
                raise UsageError(str(exc)) from None

    ipython.register_magics(KwbMagics)
