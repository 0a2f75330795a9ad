"""KernelEditor: write a kernel, run it against a task off the UI thread, read the verdict in place.

The code area has line numbers and highlighting (`widgets.code_editor`) and marks the lines a finding or
traceback points at. The verdict card, the error heatmap and the candidate it builds are plain functions
(`widgets.verdict.result_html`, `widgets.error_map.error_heatmap`, `build_candidate`) so tests check them
without a browser; the widget only wires them. In a notebook the `%%kwb` cell magic is the other way to run
a kernel: the cell is the editor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import traitlets as t

from widgets._html import esc
from widgets._runner import Job, discard_judge
from widgets.code_editor import CodeEditor
from widgets.error_map import HEATMAP_MAX_CELLS, error_heatmap, fill_error_heatmap, map_view, pool_error_map
from widgets.skeleton import is_starting_point, skeleton_source
from widgets.static import StaticMixin
from widgets.verdict import line_refs, result_html, state_html
from workbench.candidate import LANGUAGES, Candidate
from workbench.errors import WorkbenchError, require
from workbench.result import Result
from workbench.tasks.sizes import size_label
from workbench.tasks.task import Task, get_task, tasks

w = require("ipywidgets", "lab", "the kernel editor")

__all__ = ["KernelEditor", "build_candidate", "starter_source", "solution_source", "resolve_task", "pool_error_map",
           "error_heatmap", "HEATMAP_MAX_CELLS"]

#: Points to the cell magic, where JupyterLab's own editor (completion, search) holds the kernel.
MAGIC_TIP = ('<div style="color:#666;font-size:90%;text-align:right;white-space:nowrap">Tip: after '
             "<code>%load_ext widgets</code>, a cell starting <code>%%kwb TASK</code> is a kernel</div>")


# ---- plain functions ---------------------------------------------------------------------------------

def resolve_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get_task(task)


def starter_source(task: Task) -> str:
    """What the editor opens on: the task's contract and TODOs (`widgets.skeleton`), never its answer."""
    return skeleton_source(task)


def solution_source(task: Task) -> str | None:
    """The task's honest solution (behind the editor's "Show solution"), or None when it has none."""
    if not task.solution:
        return None
    try:
        return task.solution_candidate().source
    except WorkbenchError:
        return None


def build_candidate(source: str, language: str = "auto", name: str = "") -> Candidate:
    """The candidate the Run button evaluates; "auto" infers the language from the source (plain PyTorch is then
    judged by the task's kernel policy: only the language "torch" picked here makes a PyTorch baseline)."""
    lang = None if language in ("", "auto") else language
    return Candidate(source=source, language=lang, name=name.strip() or None)


def _devices() -> list[tuple[str, str]]:
    import torch

    options = [("cpu (Triton interpreter)", "cpu")]
    if torch.cuda.is_available():
        options.append((f"cuda ({torch.cuda.get_device_name(0)})", "cuda"))
    return options


# ---- the widget ----------------------------------------------------------------------------------------

class KernelEditor(StaticMixin, w.VBox):
    """Code area + task/language/device pickers + Run/Cancel; the result shows as badge, checks, errors, timing.

        ed = KernelEditor("softmax")       # opens on a skeleton: the task's signature and TODOs
        ed.load_solution()                 # or click "Show solution"; a second click brings your code back
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
        if isinstance(size, dict):  # a size the task cannot use fails here, not as a failed run later
            self._task.size(size)
        self.size, self.timeout, self.evaluate_kw = size, timeout, dict(evaluate_kw or {})
        self.job: Job | None = None
        self._stage = ""  # the running evaluation's latest progress line
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
        initial = source if source is not None else starter_source(self._task)
        # The code goes out with the code area's first state, not in a later update a slow page might miss.
        self._code = CodeEditor(value=initial, rows=22, layout=w.Layout(width="100%"))
        self._code.add_class("kwb-source")
        self._info = w.HTML()
        self._info.add_class("kwb-source-info")
        self._run = w.Button(description="Run", icon="play", button_style="primary", tooltip="Evaluate this kernel")
        self._run.add_class("kwb-run")
        self._cancel = w.Button(description="Cancel", icon="stop", disabled=True,
                                tooltip="Stop waiting; the worker's late answer is ignored")
        self._cancel.add_class("kwb-cancel")
        self._reset = w.Button(description="Show solution", icon="eye", layout=w.Layout(width="auto"),
                               tooltip="Show the task's honest solution; click again to get your code back")
        self._reset.add_class("kwb-show-solution")
        #: The student's code while the solution is shown (None otherwise): "Back to my code" restores it.
        self._own_code: str | None = None
        self._progress = w.HTML()
        self._panel = w.HTML()
        self._panel.add_class("kwb-result-panel")
        self._heatmap = error_heatmap(None, widget=True)
        self._heatmap_box = w.Box([self._heatmap.view], layout=w.Layout(display="none", width="100%"))

        super().__init__(source=initial, task_name=self._task.name, language=language, device=device, **kwargs)
        self.add_class("kwb-editor")
        self.children = [
            w.HBox([self._task_picker, self._language_picker, self._device_picker, self._name]),
            self._code, w.HBox([self._info, w.HTML(MAGIC_TIP, layout=w.Layout(flex="1 1 auto"))],
                               layout=w.Layout(width="100%")),
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
        self._reset.on_click(lambda _: self.toggle_solution())
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
        """Replace the code with the task's honest solution, keeping the student's own code to come back to."""
        solution = solution_source(self._task)
        if solution is None:
            self._panel.value = state_html("idle", f"task {self._task.name} ships no solution to show.")
            return
        if self.source != solution:
            self._own_code = self.source
        self.source = solution
        if self._own_code is not None:
            self._reset.description, self._reset.icon = "Back to my code", "undo"

    def toggle_solution(self) -> None:
        """The "Show solution" button: show the solution; once shown, "Back to my code" puts the student's code
        back (the solution is always one click away again; their own code is not, so it is what is kept)."""
        if self._own_code is not None:
            self.source, self._own_code = self._own_code, None
            self._reset.description, self._reset.icon = "Show solution", "eye"
            return
        self.load_solution()

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
                result = self._evaluate(task, candidate, device, None)
            except Exception as exc:
                self._show_error(exc)
                raise
            self._finish(result)
            return result
        self._started()
        self.job = Job(lambda job: self._evaluate(task, candidate, device, job), on_done=self._finish,
                       on_error=self._show_error, on_progress=self._tick, on_cancel=self._cancelled).start()
        return None

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def show(self, result: Result) -> None:
        """Display a result produced elsewhere (a study, the LLM loop) as if this editor had run it."""
        self._finish(result)

    # ---- internals -----------------------------------------------------------------------------------
    def _evaluate(self, task: Task, candidate: Candidate, device: str, job: Job | None) -> Result:
        """Evaluate with the job's cancel token (Cancel ends the evaluation's judge at once) and the judge's stage
        shown beside the elapsed time."""
        from workbench import EvalOptions, evaluate

        def stage(progress: Any) -> None:
            self._stage = progress.describe()

        options = EvalOptions(device=device, size=self.size, timeout=self.timeout, on_progress=stage,
                              cancel=job.cancel_event if job is not None else None).replace(**self.evaluate_kw)
        return evaluate(task, candidate, options=options)

    def running_text(self) -> str:
        """What the panel says while a run is in flight: the task and every name of the size that runs."""
        try:
            full = self._task.size(self.size, self.device)
        except WorkbenchError:
            return "evaluating in a worker process: compile, check, time…"
        dtype = None if "dtype" in full else (self._task.dtypes[0] if self._task.dtypes else None)
        return (f"evaluating {self._task.name} ({size_label(full, dtype) or 'the file defaults'}) on "
                f"{self.device} in a worker process: compile, check, time…")

    def _started(self) -> None:
        self.status = "running"
        self._run.disabled, self._cancel.disabled = True, False
        self._panel.value = state_html("running", self.running_text())
        self._progress.value = ""
        self._stage = ""

    def _tick(self, done: int, total: int, elapsed: float) -> None:
        stage = f" · {esc(self._stage.rsplit(' · ', 1)[0])}" if self._stage else ""
        self._progress.value = f'<span class="kwb-elapsed">&#9203; {elapsed:.1f} s{stage}</span>'

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
        discard_judge(self.device)
        self._idle_buttons()
        self.status = "cancelled"
        elapsed = self.job.elapsed if self.job else 0.0
        self._panel.value = state_html("cancelled", f"cancelled after {elapsed:.1f} s; a late answer is ignored.")

    def _show_error(self, exc: BaseException) -> None:
        self._idle_buttons()
        self.status = "error"
        self._panel.value = state_html("error", f"{type(exc).__name__}: {exc}")

    def _on_source(self, change: Any = None) -> None:
        if change is not None:
            self._code.error_lines = []  # marks of the last run no longer match edited code
        try:
            cand = self.candidate()
            ident = f" · candidate <code>{cand.id[:8]}</code> ({esc(cand.language)})"
        except WorkbenchError:
            ident = ""
        lines = self.source.count("\n") + (1 if self.source and not self.source.endswith("\n") else 0)
        self._info.value = f'<span style="color:#666;font-size:90%;white-space:nowrap">{lines} lines{ident}</span>'

    def _on_language(self, change: Any) -> None:
        self._on_source()

    def _on_task(self, change: Any) -> None:
        if change["new"] == self._task.name:
            return
        old = self._task
        self._task = resolve_task(change["new"])
        if is_starting_point(self.source, old):
            self.source = starter_source(self._task)
        self._own_code = None
        self._reset.description, self._reset.icon = "Show solution", "eye"
        self.result = None
        self.status = "idle"
        self._panel.value = state_html("idle", f"task {self._task.name}: press Run.")

    def _on_result(self, change: Any = None) -> None:
        result = self.result
        if result is None:
            self._heatmap_box.layout.display = "none"
            return
        self._panel.value = result_html(result)
        if result.source == self.source:
            self._code.error_lines = line_refs(result) if result.status != "ok" else []
        view = map_view(result)
        with self._heatmap.batch_update():
            fill_error_heatmap(self._heatmap, view)
        self._heatmap_box.layout.display = "none" if view is None else "flex"

    def _static_parts(self) -> list[Any]:
        result = self.result
        parts: list[Any] = [result_html(result) if result is not None else state_html(self.status)]
        if result is not None:
            parts.append(error_heatmap(result))
        numbered = "\n".join(f'<span style="color:#999;user-select:none">{i:>4}</span>  {esc(line)}'
                             for i, line in enumerate(self.source.splitlines(), 1))
        parts.append(f'<details><summary>source ({esc(self.task_name)})</summary><pre class="kwb-source-static" '
                     f'style="max-height:30em;overflow:auto;background:#f7f7f7;padding:4px">{numbered}</pre></details>')
        return parts
