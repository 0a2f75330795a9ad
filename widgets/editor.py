"""KernelEditor: write a kernel, run it against a task off the UI thread, read the verdict in place.

The verdict panel, the error heatmap and the candidate it builds are plain functions (`result_html`,
`error_heatmap`, `build_candidate`) so tests check them without a browser; the widget only wires them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import traitlets as t

from widgets._html import esc, result_html, state_html
from widgets._runner import Job
from widgets.static import StaticMixin
from workbench.candidate import LANGUAGES, Candidate, infer_language
from workbench.errors import WorkbenchError, require
from workbench.result import Result
from workbench.tasks.task import Task, get_task, tasks

w = require("ipywidgets", "lab", "the kernel editor")
go = require("plotly.graph_objects", "lab", "the kernel editor", package="plotly")

#: Larger error maps are max-pooled to this many cells per side so widget messages stay small.
HEATMAP_MAX_CELLS = 128

#: Monospace for the code area: ipywidgets' Textarea has no font option, a page-level rule does it.
_CSS = ("<style>.kwb-source textarea{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
        "font-size:12px;line-height:1.35;tab-size:4;white-space:pre}</style>")


# ---- plain functions ---------------------------------------------------------------------------------

def resolve_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get_task(task)


def starter_source(task: Task) -> str:
    """What the editor starts with: the task's honest solution, else a skeleton that names the contract."""
    if task.solution:
        try:
            return task.solution_candidate().source
        except WorkbenchError:
            pass
    return ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
            "@triton.jit\ndef kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n    ...\n\n\n"
            "class ModelNew(nn.Module):\n    \"\"\"Built like the reference Model; forward launches `kernel`.\"\"\"\n\n"
            "    def forward(self, *inputs):\n        ...\n")


def build_candidate(source: str, language: str = "auto", name: str = "") -> Candidate:
    """The candidate the Run button evaluates; "auto" infers the language from the source."""
    lang = infer_language(source) if language in ("", "auto") else language
    return Candidate(source=source, language=lang, name=name.strip() or None)


def pool_error_map(error_map: Any, max_cells: int = HEATMAP_MAX_CELLS) -> np.ndarray | None:
    """A 2-D |err|/tol map as an array, max-pooled to at most `max_cells` per side (a failure never shrinks
    away: pooling by max keeps every cell above 1 visible). None when there is no 2-D map."""
    if error_map is None:
        return None
    arr = np.asarray(error_map, dtype=float)
    if arr.ndim != 2 or arr.size == 0:
        return None
    rows, cols = arr.shape
    fr, fc = -(-rows // max_cells), -(-cols // max_cells)
    if fr > 1 or fc > 1:
        pad = np.full((-(-rows // fr) * fr, -(-cols // fc) * fc), np.nan)
        pad[:rows, :cols] = arr
        arr = np.nanmax(pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fc, fc), axis=(1, 3))
    return arr


def error_heatmap(error_map: Any, widget: bool = False) -> Any:
    """Heatmap of |out - ref| / tolerance: cells above 1 fail. None without a 2-D map."""
    arr = pool_error_map(error_map)
    fig = (go.FigureWidget if widget else go.Figure)()
    fig.add_heatmap(z=None if arr is None else arr.tolist(), zmin=0, zmax=2, name="|err|/tol",
                    colorscale=[[0, "#f7fbff"], [0.5, "#9ecae1"], [0.5, "#fcae91"], [1, "#a50f15"]],
                    colorbar={"title": {"text": "|err| / tol"}}, hovertemplate="row %{y}, col %{x}: %{z:.3g}<extra></extra>")
    fig.update_layout(title="Where the output is wrong (|error| / tolerance; above 1 fails)", height=320,
                      margin={"l": 40, "r": 10, "t": 40, "b": 30}, yaxis={"autorange": "reversed"})
    return fig if arr is not None or widget else None


def _devices() -> list[tuple[str, str]]:
    import torch

    options = [("cpu (Triton interpreter)", "cpu")]
    if torch.cuda.is_available():
        options.append((f"cuda ({torch.cuda.get_device_name(0)})", "cuda"))
    return options


# ---- the widget ----------------------------------------------------------------------------------------

class KernelEditor(StaticMixin, w.VBox):
    """Code area + task/language/device pickers + Run/Cancel; the result shows as badge, checks, errors, timing.

        ed = KernelEditor("softmax")       # starts with the task's honest solution
        ed.run(block=True).status          # or click Run; ed.result holds the latest Result
    """

    source = t.Unicode(help="Candidate source text (the code area's content).")
    task_name = t.Unicode(help="Name of the task candidates are judged against.")
    language = t.Unicode("auto", help="Candidate language; 'auto' infers it from the source.")
    device = t.Unicode("cpu", help="'cpu' (Triton interpreter) or 'cuda'.")
    status = t.Unicode("idle", help="idle, running, cancelled, error, or the last result's status.")
    result = t.Instance(Result, allow_none=True, help="The latest Result (None before the first run).")

    _static_title = "Kernel Workbench: editor"

    def __init__(self, task: str | Task = "vector_add", source: str | None = None, *, language: str = "auto",
                 device: str | None = None, size: Any = None, timeout: float | None = None, name: str = "",
                 evaluate_kw: dict[str, Any] | None = None, **kwargs: Any):
        self._task = resolve_task(task)
        self.size, self.timeout, self.evaluate_kw = size, timeout, dict(evaluate_kw or {})
        self.job: Job | None = None
        self._callbacks: list[Callable[[Result], Any]] = []
        devices = _devices()
        if device is None:
            device = devices[-1][1]
        elif device not in [v for _, v in devices]:
            devices.append((device, device))
        names = list(dict.fromkeys([*tasks(), self._task.name]))

        self._task_picker = w.Dropdown(options=names, value=self._task.name, description="task",
                                       layout=w.Layout(width="220px"))
        self._language_picker = w.Dropdown(options=["auto", *LANGUAGES], value=language, description="language",
                                           layout=w.Layout(width="190px"))
        self._device_picker = w.Dropdown(options=devices, value=device, description="device",
                                         layout=w.Layout(width="300px"))
        self._name = w.Text(value=name, placeholder="name (optional)", layout=w.Layout(width="180px"))
        self._code = w.Textarea(layout=w.Layout(width="100%", height="320px"))
        self._code.add_class("kwb-source")
        self._info = w.HTML()
        self._info.add_class("kwb-source-info")
        self._run = w.Button(description="Run", icon="play", button_style="primary", tooltip="Evaluate this kernel")
        self._run.add_class("kwb-run")
        self._cancel = w.Button(description="Cancel", icon="stop", disabled=True,
                                tooltip="Stop waiting; the worker's late answer is ignored")
        self._cancel.add_class("kwb-cancel")
        self._reset = w.Button(description="Load solution", icon="undo",
                               tooltip="Replace the code with the task's honest solution")
        self._progress = w.HTML()
        self._panel = w.HTML()
        self._panel.add_class("kwb-result-panel")
        self._heatmap = error_heatmap(None, widget=True)
        self._heatmap_box = w.Box([self._heatmap], layout=w.Layout(display="none", width="100%"))

        initial = source if source is not None else starter_source(self._task)
        super().__init__(source=initial, task_name=self._task.name, language=language, device=device, **kwargs)
        self.add_class("kwb-editor")
        self.children = [
            w.HTML(_CSS),
            w.HBox([self._task_picker, self._language_picker, self._device_picker, self._name]),
            self._code, self._info,
            w.HBox([self._run, self._cancel, self._reset, self._progress]),
            self._panel, self._heatmap_box,
        ]
        t.link((self, "source"), (self._code, "value"))
        t.link((self, "language"), (self._language_picker, "value"))
        t.link((self, "device"), (self._device_picker, "value"))
        t.link((self, "task_name"), (self._task_picker, "value"))
        self.observe(self._on_source, "source")
        self.observe(self._on_task, "task_name")
        self.observe(self._on_language, "language")
        self.observe(self._on_result, "result")
        self._run.on_click(lambda _: self.run())
        self._cancel.on_click(lambda _: self.cancel())
        self._reset.on_click(lambda _: self.load_solution())
        self._on_source()
        self._panel.value = state_html("idle", "Press Run to check and time this kernel.")

    # ---- public API ----------------------------------------------------------------------------------
    @property
    def task(self) -> Task:
        return self._task

    def candidate(self) -> Candidate:
        return build_candidate(self.source, self.language, self._name.value)

    def on_result(self, callback: Callable[[Result], Any]) -> None:
        """Call `callback(result)` after every finished run (the Workbench stores and plots results)."""
        self._callbacks.append(callback)

    def load_solution(self) -> None:
        self.source = starter_source(self._task)

    def run(self, block: bool = False) -> Result | None:
        """Evaluate the current source. block=True waits and returns the Result (scripts, papermill);
        otherwise a background thread waits and the panel updates when the worker answers."""
        if self.job is not None and self.job.running:
            return None
        try:
            candidate = self.candidate()
        except WorkbenchError as exc:
            self._show_error(exc)
            return None
        task, device = self._task, self.device
        if block:
            self._started()
            try:
                result = self._evaluate(task, candidate, device)
            except Exception as exc:
                self._show_error(exc)
                raise
            self._finish(result)
            return result
        self._started()
        self.job = Job(lambda job: self._evaluate(task, candidate, device), on_done=self._finish,
                       on_error=self._show_error, on_progress=self._tick, on_cancel=self._cancelled).start()
        return None

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def show(self, result: Result) -> None:
        """Display a result produced elsewhere (a study, the LLM loop) as if this editor had run it."""
        self._finish(result)

    # ---- internals -----------------------------------------------------------------------------------
    def _evaluate(self, task: Task, candidate: Candidate, device: str) -> Result:
        from workbench import evaluate

        return evaluate(task, candidate, device=device, size=self.size, timeout=self.timeout, **self.evaluate_kw)

    def _started(self) -> None:
        self.status = "running"
        self._run.disabled, self._cancel.disabled = True, False
        self._panel.value = state_html("running", "evaluating in a worker process: compile, check, time…")
        self._progress.value = ""

    def _tick(self, done: int, total: int, elapsed: float) -> None:
        self._progress.value = f'<span class="kwb-elapsed">&#9203; {elapsed:.1f} s</span>'

    def _idle_buttons(self) -> None:
        self._run.disabled, self._cancel.disabled = False, True
        self._progress.value = ""

    def _finish(self, result: Result) -> None:
        self._idle_buttons()
        self.result = result
        self.status = result.status
        self._on_result()
        for callback in self._callbacks:
            callback(result)

    def _cancelled(self) -> None:
        # A hung kernel would hold the device's worker until its timeout: end that worker now; the next
        # evaluation starts a fresh one. (Any other evaluation in flight on it reports "crashed".)
        try:
            from workbench.eval.judge_pool import discard_worker
        except ImportError:  # pragma: no cover - engine without a worker pool
            discard_worker = None
        if discard_worker is not None:
            discard_worker(self.device)
        self._idle_buttons()
        self.status = "cancelled"
        elapsed = self.job.elapsed if self.job else 0.0
        self._panel.value = state_html("cancelled", f"cancelled after {elapsed:.1f} s; a late answer is ignored.")

    def _show_error(self, exc: BaseException) -> None:
        self._idle_buttons()
        self.status = "error"
        self._panel.value = state_html("error", f"{type(exc).__name__}: {exc}")

    def _on_source(self, change: Any = None) -> None:
        try:
            cand = self.candidate()
            ident = f" · candidate <code>{cand.id[:8]}</code> ({esc(cand.language)})"
        except WorkbenchError:
            ident = ""
        lines = self.source.count("\n") + (1 if self.source and not self.source.endswith("\n") else 0)
        self._info.value = f'<span style="color:#666;font-size:90%">{lines} lines{ident}</span>'

    def _on_language(self, change: Any) -> None:
        self._on_source()

    def _on_task(self, change: Any) -> None:
        if change["new"] == self._task.name:
            return
        old = self._task
        self._task = resolve_task(change["new"])
        if self.source.strip() in ("", starter_source(old).strip()):
            self.source = starter_source(self._task)
        self.result = None
        self.status = "idle"
        self._panel.value = state_html("idle", f"task {self._task.name}: press Run.")

    def _on_result(self, change: Any = None) -> None:
        result = self.result
        if result is None:
            self._heatmap_box.layout.display = "none"
            return
        self._panel.value = result_html(result)
        arr = pool_error_map(result.details.get("error_map"))
        with self._heatmap.batch_update():
            self._heatmap.data[0].z = None if arr is None else arr.tolist()
        self._heatmap_box.layout.display = "none" if arr is None else "flex"

    def _static_parts(self) -> list[Any]:
        result = self.result
        parts: list[Any] = [result_html(result) if result is not None else state_html(self.status)]
        if result is not None:
            parts.append(error_heatmap(result.details.get("error_map")))
        parts.append(f'<details><summary>source ({esc(self.task_name)})</summary><pre class="kwb-source-static">'
                     f"{esc(self.source)}</pre></details>")
        return parts
