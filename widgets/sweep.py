"""SweepExplorer: evaluate a grid of knobs (BLOCK x num_warps, ...) of a kernel and see the times.

The grid is data (`workbench.study.sweep.Sweep`): the kernel's source is the template, and a knob is anything
it already says (a module constant, a launch parameter such as `BLOCK=` or `num_warps=`, or the variable that
feeds one), so the built-in solutions sweep as they are. The widget writes the grid as one
`NAME = v1, v2, ...` line per knob and lists the knobs the current kernel has. Each config is a complete
candidate evaluated like any other; failed configs stay in the plot, labelled with their status.
"""

from __future__ import annotations

import ast
from typing import Any

import traitlets as t

from widgets._html import esc, fmt_ms, table
from widgets._runner import Job
from widgets.static import StaticMixin
from widgets.sweep_plot import fill_sweep_figure, heatmap_data, line_data, sweep_figure, sweep_frame
from workbench.errors import CandidateError, require
from workbench.result import Result
from workbench.study.sweep import Sweep, best_config, knobs, suggest_grid, sweep_row, ties_with_best

w = require("ipywidgets", "lab", "the sweep explorer")

__all__ = ["SweepExplorer", "parse_grid", "grid_text", "default_grid", "heatmap_data", "line_data", "sweep_figure",
           "sweep_frame", "sweep_row"]

#: What the grid box shows while empty: an example, never a fake result.
PLACEHOLDER = "BLOCK = 256, 512, 1024\nnum_warps = 2, 4"


def parse_grid(text: str) -> dict[str, list[Any]]:
    """`"BLOCK = 64, 128\\nnum_warps = 2, 4"` -> {"BLOCK": [64, 128], "num_warps": [2, 4]} (Python literals).
    A knob may name one kernel's launches: `softmax_row_kernel.BLOCK = 256, 512`."""
    grid: dict[str, list[Any]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, values = line.partition("=")
        name = name.strip()
        if not sep or not name or not all(part.isidentifier() for part in name.split(".")):
            raise CandidateError(f"grid line {number}: write `NAME = value, value, ...`, got {line!r}")
        try:
            parsed = ast.literal_eval(f"[{values}]")
        except (SyntaxError, ValueError) as exc:
            raise CandidateError(f"grid line {number}: values must be Python literals, got {values.strip()!r}") from exc
        if not parsed:
            raise CandidateError(f"grid line {number}: {name} has no values")
        if name in grid:
            raise CandidateError(f"grid line {number}: {name} is given twice; put all its values on one line")
        grid[name] = parsed
    if not grid:
        raise CandidateError("the grid is empty: add a line like `BLOCK = 256, 512` (one line per knob)")
    return grid


def grid_text(grid: dict[str, list[Any]]) -> str:
    return "\n".join(f"{k} = {', '.join(repr(v) for v in vals)}" for k, vals in grid.items())


def default_grid(template: str, device: str = "cpu") -> dict[str, list[Any]]:
    """A starting grid for `template` (see `workbench.study.sweep.suggest_grid`); {} when it does not parse."""
    try:
        return suggest_grid(template, device)
    except CandidateError:
        return {}


def knobs_html(template: str) -> str:
    """The knobs the kernel offers, each with where it acts and its current value."""
    try:
        found = knobs(template)
    except CandidateError as exc:
        return f'<span class="kwb-sweep-error" style="color:#c62828">{esc(str(exc))}</span>'
    if not found:
        return "<i>this kernel has no knobs: no module constants and no Triton launches</i>"
    items = "".join(f"<li><code>{esc(k.name)}</code> <span style='color:#666'>{esc(k.where)}; now "
                    f"<code>{esc(' | '.join(k.current))}</code></span></li>" for k in found.values())
    return f'<ul class="kwb-sweep-knobs" style="margin:2px 0 2px 1em;padding:0">{items}</ul>'


def help_html(template: str) -> str:
    return ('<div class="kwb-sweep-help" style="color:#444;font-size:92%;line-height:1.4">'
            "<b>Sweep the kernel's knobs.</b> One line per knob, <code>NAME = value, value, ...</code>: a module "
            "constant, a launch parameter (<code>BLOCK</code>, <code>num_warps</code>, <code>num_stages</code>; "
            "<code>kernel.BLOCK</code> for one kernel only) or the variable that feeds one. The kernel itself is "
            "not edited: each config is a copy with those values written in. One knob draws a line with its "
            "95% CI band, two a heatmap with the fastest correct config starred."
            f"<details open><summary>knobs in the current kernel</summary>{knobs_html(template)}</details></div>")


def rows_html(frame) -> str:
    if frame is None or not len(frame):
        return ""
    hidden = ("flags", "candidate", "speedup", "sol_fraction", "ci95_low_ms", "ci95_high_ms")
    cols = [c for c in frame.columns if c not in hidden]

    def cell(row: Any, c: str) -> str:
        if c == "time_ms":
            value = row[c]
            if value is None or value != value:
                return "–"
            lo, hi = row.get("ci95_low_ms"), row.get("ci95_high_ms")
            ci = f" [{fmt_ms(lo)}, {fmt_ms(hi)}]" if lo == lo and hi == hi and lo is not None and hi is not None else ""
            return esc(fmt_ms(value) + ci)
        value = row[c]
        return "–" if value is None or value != value else esc(str(value))

    headers = [esc("time [95% CI]" if c == "time_ms" else c) for c in cols]
    return table(headers, [[cell(row, c) for c in cols] for _, row in frame.iterrows()], "kwb-sweep-rows")


def best_html(best: dict[str, Any] | None, ran: bool = True, ties: int = 0, clock: str | None = None) -> str:
    """The starred config, with how many others its 95% CI overlaps (`ties_with_best`) and, on the interpreter,
    that the times are the interpreter's."""
    if not ran:
        return ""
    if best is None:
        return '<p class="kwb-sweep-best"><i>No config passed.</i></p>'
    knobs_ = ", ".join(f"<code>{esc(k)} = {esc(repr(v))}</code>" for k, v in best.items() if k != "time_ms")
    notes = []
    if ties:
        notes.append(f"within noise of {ties} other config{'s' if ties > 1 else ''}: their 95% CIs overlap, so "
                     "this run does not tell them apart")
    if clock == "interpreter":
        notes.append("interpreter times measure Triton's CPU interpreter, where num_warps and num_stages do nothing; "
                     "rank configs on a GPU")
    note = f'<br><span class="kwb-sweep-ties" style="color:#666">{esc("; ".join(notes))}</span>' if notes else ""
    return (f'<p class="kwb-sweep-best">&#9733; fastest correct config: {knobs_} '
            f'({esc(fmt_ms(best["time_ms"]))}){note}</p>')


def _error(text: str) -> str:
    return f'<span class="kwb-sweep-error" style="color:#c62828">{esc(text)}</span>'


class SweepExplorer(StaticMixin, w.VBox):
    """A grid of kernel knobs, evaluated with a progress bar; a line plot (one knob) or heatmap (two).

        SweepExplorer("softmax", template=src, grid={"BLOCK": [256, 512], "num_warps": [2, 4]}).run(block=True)
    """

    grid_spec = t.Unicode(help="One `NAME = v1, v2, ...` line per knob.")

    _static_title = "Kernel Workbench: sweep"

    def __init__(self, task: Any, template: str = "", grid: dict[str, list[Any]] | None = None, *,
                 device: str | None = None, size: Any = None, template_source: Any = None,
                 evaluate_kw: dict[str, Any] | None = None, **kwargs: Any):
        from widgets.editor import resolve_task, solution_source, starter_source

        self.task = resolve_task(task)
        self.template = template or solution_source(self.task) or starter_source(self.task)
        self.device, self.size = device, size
        self.evaluate_kw = dict(evaluate_kw or {})
        #: Optional zero-argument callable giving the current template (the Workbench passes the editor's source).
        self.template_source = template_source
        self.rows: list[dict[str, Any]] = []
        self.results: list[Result] = []
        self.job: Job | None = None
        self._callbacks: list[Any] = []
        self._knobs: list[str] = []
        self._grid = w.Textarea(layout=w.Layout(width="340px", height="84px"), placeholder=PLACEHOLDER)
        self._grid.add_class("kwb-sweep-grid")
        self._run = w.Button(description="Run sweep", icon="th", button_style="primary")
        self._run.add_class("kwb-sweep-run")
        self._cancel = w.Button(description="Cancel", icon="stop", disabled=True)
        self._suggest = w.Button(description="Suggest grid", icon="magic",
                                 tooltip="A block size at half, same and double its value, and num_warps")
        self._progress = w.IntProgress(value=0, min=0, max=1, description="0/0", layout=w.Layout(width="300px"))
        self._status = w.HTML()
        self._help = w.HTML(help_html(self.current_template()))
        self._best = w.HTML()
        self.figure = sweep_figure(sweep_frame([], ["x"]), ["x"], widget=True)
        self._figure_box = w.Box([self.figure.view], layout=w.Layout(display="none", width="100%"))
        self._table = w.HTML()
        spec = grid_text(grid) if grid else grid_text(default_grid(self.current_template(), device or "cpu"))
        super().__init__(grid_spec=spec, **kwargs)
        self.add_class("kwb-sweep")
        self.children = [
            w.HBox([self._grid, w.VBox([w.HBox([self._run, self._cancel, self._suggest]), self._progress,
                                        self._status])]),
            self._help, self._best, self._figure_box, self._table,
        ]
        t.link((self, "grid_spec"), (self._grid, "value"))
        self._suggest.on_click(lambda _: self.suggest_grid())
        self._run.on_click(lambda _: self.run())
        self._cancel.on_click(lambda _: self.cancel())

    # ---- data ----------------------------------------------------------------------------------------
    def current_template(self) -> str:
        return self.template_source() if self.template_source is not None else self.template

    def refresh_knobs(self) -> None:
        """Re-list the current kernel's knobs (the Workbench calls this when the editor's code changes); an empty
        grid is filled from them (the editor opens on a skeleton without knobs, so the grid starts empty)."""
        template = self.current_template()
        self._help.value = help_html(template)
        if not self.grid_spec.strip():
            grid = default_grid(template, self.device or "cpu")
            if grid:
                self.grid_spec = grid_text(grid)

    def sweep(self) -> Sweep:
        return Sweep(template=self.current_template(), grid=parse_grid(self.grid_spec), name=f"{self.task.name}-sweep")

    def suggest_grid(self) -> dict[str, list[Any]]:
        """Fill the grid from the current kernel's knobs (see `default_grid`)."""
        grid = default_grid(self.current_template(), self.device or "cpu")
        self.refresh_knobs()
        if grid:
            self.grid_spec = grid_text(grid)
            self._status.value = ""
        else:
            self._status.value = _error("no knob to suggest: add a module constant such as `BLOCK = 256` or pass "
                                        "BLOCK=... at the kernel launch")
        return grid

    @property
    def frame(self):
        return sweep_frame(self.rows, self._knobs)

    @property
    def best(self) -> dict[str, Any] | None:
        return best_config(self.frame, self._knobs) if self.rows else None

    def on_result(self, callback: Any) -> None:
        """Called with each config's Result (the Workbench stores them)."""
        self._callbacks.append(callback)

    # ---- running -------------------------------------------------------------------------------------
    def run(self, block: bool = False) -> Any:
        """Evaluate every config; block=True returns the frame when done (scripts, papermill). A bad grid or
        an unknown knob shows its message in the widget and returns None."""
        if self.job is not None and self.job.running:
            return None
        try:
            sweep = self.sweep()
            sweep.check()  # fails now, naming the kernel's knobs, if a knob is unknown
        except CandidateError as exc:
            self._status.value = _error(str(exc))
            self.refresh_knobs()
            return None
        configs = sweep.configs()
        self._knobs = list(sweep.grid)
        self.rows, self.results = [], []
        self._progress.max, self._progress.value = max(len(configs), 1), 0
        self._progress.description = f"0/{len(configs)}"
        self._status.value = ""
        self._run.disabled, self._cancel.disabled = True, False
        self._render()
        task, device, size, kw = self.task, self.device, self.size, self.evaluate_kw

        def work(job: Job) -> None:
            from workbench import evaluate

            for i, config in enumerate(configs):
                if job.cancelled:
                    return
                result = evaluate(task, sweep.candidate(config), device=device, size=size, cancel=job.cancel_event,
                                  **kw)
                if job.cancelled:
                    return
                self._deliver(config, result, i + 1, len(configs), job)

        if block:
            work(Job(work))
            self._finished()
            return self.frame
        self.job = Job(work, on_done=lambda _: self._finished(), on_error=self._failed, on_cancel=self._cancelled)
        self.job.start()
        return None

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def _deliver(self, config: dict[str, Any], result: Result, done: int, total: int, job: Job) -> None:
        from widgets._runner import call_on_main

        def apply() -> None:
            if job.cancelled:
                return
            self.rows.append(sweep_row(config, result))
            self.results.append(result)
            self._progress.value, self._progress.description = done, f"{done}/{total}"
            for callback in self._callbacks:
                callback(result)
            self._render()

        call_on_main(apply)

    def _finished(self) -> None:
        self._run.disabled, self._cancel.disabled = False, True
        ok = sum(r["status"] == "ok" for r in self.rows)
        self._status.value = f"{len(self.rows)} configs, {ok} passed"

    def _failed(self, exc: BaseException) -> None:
        self._run.disabled, self._cancel.disabled = False, True
        self._status.value = _error(f"{type(exc).__name__}: {exc}")

    def _cancelled(self) -> None:
        self._run.disabled, self._cancel.disabled = False, True
        self._status.value = f"cancelled after {len(self.rows)} configs"

    # ---- rendering -----------------------------------------------------------------------------------
    def _clock(self) -> str | None:
        clocks = {r["clock"] for r in self.rows if r["clock"]}
        return clocks.pop() if len(clocks) == 1 else None

    def _best_line(self, frame) -> str:
        return best_html(best_config(frame, self._knobs), True, ties_with_best(frame), self._clock())

    def _render(self) -> None:
        ran = bool(self.rows)
        self._figure_box.layout.display = "flex" if ran else "none"
        if not ran:
            self._best.value = self._table.value = ""
            return
        frame = self.frame
        with self.figure.batch_update():
            fill_sweep_figure(self.figure, frame, self._knobs, self._clock())
        self._best.value = self._best_line(frame)
        self._table.value = rows_html(frame)

    def _static_parts(self) -> list[Any]:
        if not self.rows:
            return [help_html(self.current_template())]
        frame = self.frame
        return [self._best_line(frame), sweep_figure(frame, self._knobs, self._clock()), rows_html(frame)]
