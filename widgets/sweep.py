"""SweepExplorer: evaluate a grid of meta-parameters (e.g. BLOCK x NUM_WARPS) and see it as a heatmap.

The grid is data (`workbench.study.sweep.Sweep`: a template whose top-level constants are the knobs, and the
values to try), written in the widget as one `NAME = v1, v2, ...` line per knob. Each config is a complete
candidate file, evaluated like any other; failed configs stay in the grid, labelled with their status.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import traitlets as t

from widgets._html import esc, fmt_ms, table
from widgets._runner import Job
from widgets.static import StaticMixin
from workbench.errors import CandidateError, require
from workbench.result import Result
from workbench.study.sweep import Sweep, best_config, module_constant_values

w = require("ipywidgets", "lab", "the sweep explorer")
go = require("plotly.graph_objects", "lab", "the sweep explorer", package="plotly")

#: Columns of a sweep frame that are not knobs (same as workbench.study.sweep.run_sweep's rows).
RESULT_COLUMNS = ("status", "flags", "time_ms", "clock", "speedup", "sol_fraction", "candidate")


def parse_grid(text: str) -> dict[str, list[Any]]:
    """`"BLOCK = 64, 128\\nNUM_WARPS = 2, 4"` -> {"BLOCK": [64, 128], "NUM_WARPS": [2, 4]} (Python literals)."""
    grid: dict[str, list[Any]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, values = line.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise CandidateError(f"grid line {number}: write `NAME = value, value, ...`, got {line!r}")
        try:
            parsed = ast.literal_eval(f"[{values}]")
        except (SyntaxError, ValueError) as exc:
            raise CandidateError(f"grid line {number}: values must be Python literals, got {values.strip()!r}") from exc
        if not parsed:
            raise CandidateError(f"grid line {number}: {name} has no values")
        grid[name] = parsed
    if not grid:
        raise CandidateError("the grid is empty: add a line like `BLOCK = 64, 128, 256`")
    return grid


def grid_text(grid: dict[str, list[Any]]) -> str:
    return "\n".join(f"{k} = {', '.join(repr(v) for v in vals)}" for k, vals in grid.items())


def default_grid(template: str) -> dict[str, list[Any]]:
    """A starting grid from the template's integer constants: each power of two x/2, x, 2x."""
    grid = {}
    for name, value in module_constant_values(template).items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 1 and name.isupper():
            grid[name] = sorted({max(1, value // 2), value, value * 2})
    return grid


def sweep_row(config: dict[str, Any], result: Result) -> dict[str, Any]:
    """One tidy row, in the same shape as `workbench.study.sweep.run_sweep`, so `best_config` reads both."""
    return {**config, "status": result.status, "flags": list(result.flags), "time_ms": result.time_ms,
            "clock": result.timing.clock if result.timing else None, "speedup": result.speedup,
            "sol_fraction": result.sol_fraction, "candidate": result.candidate_name}


def sweep_frame(rows: list[dict[str, Any]], knobs: list[str]):
    import pandas as pd

    return pd.DataFrame(rows, columns=[*knobs, *RESULT_COLUMNS])


def heatmap_data(frame, knobs: list[str]) -> dict[str, Any]:
    """x = first knob, y = second knob (a single row for 1-D grids), z = time in ms (None if the config failed),
    text = the time or the failed status, best = the fastest correct config (or None)."""
    if not knobs:
        raise CandidateError("a sweep needs at least one knob")
    xk, yk = knobs[0], (knobs[1] if len(knobs) > 1 else None)
    xs = list(dict.fromkeys(frame[xk].tolist()))
    ys = list(dict.fromkeys(frame[yk].tolist())) if yk else [""]
    z: list[list[float | None]] = [[None] * len(xs) for _ in ys]
    text = [["not run"] * len(xs) for _ in ys]
    for _, row in frame.iterrows():
        i = ys.index(row[yk]) if yk else 0
        j = xs.index(row[xk])
        time_ms = row["time_ms"]
        ok = row["status"] == "ok" and time_ms is not None and not (isinstance(time_ms, float) and math.isnan(time_ms))
        z[i][j] = float(time_ms) if ok else None
        text[i][j] = fmt_ms(float(time_ms)) if ok else str(row["status"])
    best = best_config(frame, knobs) if len(frame) else None
    return {"x": xs, "y": ys, "z": z, "text": text, "x_name": xk, "y_name": yk, "best": best}


def sweep_figure(data: dict[str, Any], widget: bool = False, clock: str | None = None) -> Any:
    """The grid as a heatmap of time (darker = slower), failed configs blank with their status, ★ on the best."""
    fig = (go.FigureWidget if widget else go.Figure)()
    fill_sweep_figure(fig, data, clock)
    return fig


def fill_sweep_figure(fig: Any, data: dict[str, Any], clock: str | None = None) -> None:
    xs = [str(v) for v in data["x"]]
    ys = [str(v) for v in data["y"]]
    best = data.get("best")
    star_x = [str(best[data["x_name"]])] if best else []
    star_y = [str(best[data["y_name"]]) if data["y_name"] else ""] if best else []
    fig.data = []
    fig.add_heatmap(x=xs, y=ys, z=data["z"], text=data["text"], texttemplate="%{text}", colorscale="Blues",
                    colorbar={"title": {"text": "ms"}}, name="time",
                    hovertemplate=f"{esc(data['x_name'])}=%{{x}}"
                    + (f" {esc(data['y_name'])}=%{{y}}" if data["y_name"] else "") + ": %{text}<extra></extra>")
    fig.add_scatter(x=star_x, y=star_y, mode="markers", name="best",
                    marker={"symbol": "star", "size": 22, "color": "gold", "line": {"width": 1.5, "color": "black"}},
                    hoverinfo="skip", showlegend=False)
    clock_note = f" ({clock} clock)" if clock else ""
    title = "Sweep: time per config" + clock_note + (
        f"; ★ best: {', '.join(f'{k}={v}' for k, v in best.items() if k != 'time_ms')}" if best else "")
    fig.update_layout(title=title, height=360, margin={"l": 60, "r": 10, "t": 40, "b": 40},
                      xaxis={"title": {"text": data["x_name"]}, "type": "category"},
                      yaxis={"title": {"text": data["y_name"] or ""}, "type": "category"})


def best_html(best: dict[str, Any] | None) -> str:
    if best is None:
        return '<p class="kwb-sweep-best"><i>No config passed yet.</i></p>'
    knobs = ", ".join(f"<code>{esc(k)} = {esc(repr(v))}</code>" for k, v in best.items() if k != "time_ms")
    return f'<p class="kwb-sweep-best">&#9733; fastest correct config: {knobs} ({esc(fmt_ms(best["time_ms"]))})</p>'


def rows_html(frame) -> str:
    if frame is None or not len(frame):
        return ""
    cols = [c for c in frame.columns if c not in ("flags", "candidate", "speedup", "sol_fraction")]
    rows = [[esc(fmt_ms(row[c]) if c == "time_ms" and row[c] == row[c] and row[c] is not None else str(row[c]))
             for c in cols] for _, row in frame.iterrows()]
    return table([esc(c) for c in cols], rows, "kwb-sweep-rows")


class SweepExplorer(StaticMixin, w.VBox):
    """A grid of template constants, evaluated with a progress bar and shown as a heatmap with the best marked.

        SweepExplorer("softmax", template=src, grid={"BLOCK": [64, 128], "NUM_WARPS": [2, 4]}).run(block=True)
    """

    grid_spec = t.Unicode(help="One `NAME = v1, v2, ...` line per knob.")

    _static_title = "Kernel Workbench: sweep"

    def __init__(self, task: Any, template: str = "", grid: dict[str, list[Any]] | None = None, *,
                 device: str | None = None, size: Any = None, template_source: Any = None, **kwargs: Any):
        from widgets.editor import resolve_task

        self.task = resolve_task(task)
        self.template, self.device, self.size = template, device, size
        #: Optional zero-argument callable giving the current template (the Workbench passes the editor's source).
        self.template_source = template_source
        self.rows: list[dict[str, Any]] = []
        self.results: list[Result] = []
        self.job: Job | None = None
        self._callbacks: list[Any] = []
        self._knobs: list[str] = []
        self._grid = w.Textarea(layout=w.Layout(width="320px", height="80px"),
                                placeholder="BLOCK = 64, 128, 256\nNUM_WARPS = 2, 4")
        self._grid.add_class("kwb-sweep-grid")
        self._run = w.Button(description="Run sweep", icon="th", button_style="primary")
        self._run.add_class("kwb-sweep-run")
        self._cancel = w.Button(description="Cancel", icon="stop", disabled=True)
        self._progress = w.IntProgress(value=0, min=0, max=1, description="0/0", layout=w.Layout(width="300px"))
        self._status = w.HTML()
        self._best = w.HTML(best_html(None))
        self.figure = sweep_figure(heatmap_data(sweep_frame([], ["x"]), ["x"]), widget=True)
        self._table = w.HTML()
        self._suggest = w.Button(description="Suggest grid", icon="magic",
                                 tooltip="x/2, x, 2x for each upper-case integer constant of the template")
        help_text = w.HTML('<span style="color:#666;font-size:90%">Knobs are top-level constants of the kernel file '
                           "(e.g. <code>BLOCK = 256</code>, launched with <code>BLOCK=BLOCK</code>); one line per knob."
                           "</span>")
        spec = grid_text(grid) if grid else grid_text(default_grid(template)) if template else ""
        super().__init__(grid_spec=spec, **kwargs)
        self.add_class("kwb-sweep")
        self.children = [
            help_text,
            w.HBox([self._grid, w.VBox([w.HBox([self._run, self._cancel, self._suggest]), self._progress,
                                        self._status])]),
            self._best, self.figure, self._table,
        ]
        t.link((self, "grid_spec"), (self._grid, "value"))
        self._suggest.on_click(lambda _: self.suggest_grid())
        self._run.on_click(lambda _: self.run())
        self._cancel.on_click(lambda _: self.cancel())

    # ---- data ----------------------------------------------------------------------------------------
    def sweep(self) -> Sweep:
        template = self.template_source() if self.template_source is not None else self.template
        grid = parse_grid(self.grid_spec)
        return Sweep(template=template, grid=grid, name=f"{self.task.name}-sweep")

    def suggest_grid(self) -> dict[str, list[Any]]:
        """Fill the grid from the current template's constants (see `default_grid`)."""
        template = self.template_source() if self.template_source is not None else self.template
        grid = default_grid(template)
        if grid:
            self.grid_spec = grid_text(grid)
            self._status.value = ""
        else:
            self._status.value = ('<span class="kwb-sweep-error" style="color:#c62828">the kernel has no upper-case '
                                  "integer constants to sweep: add e.g. <code>BLOCK = 256</code> at the top</span>")
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
        """Evaluate every config; block=True returns the frame when done (scripts, papermill)."""
        if self.job is not None and self.job.running:
            return None
        try:
            sweep = self.sweep()
            configs = sweep.configs()
            for config in configs[:1]:
                sweep.candidate(config)  # fails now, with the template's constants listed, if a knob is unknown
        except CandidateError as exc:
            self._status.value = f'<span class="kwb-sweep-error" style="color:#c62828">{esc(str(exc))}</span>'
            return None
        self._knobs = list(sweep.grid)
        self.rows, self.results = [], []
        self._progress.max, self._progress.value = max(len(configs), 1), 0
        self._progress.description = f"0/{len(configs)}"
        self._status.value = ""
        self._run.disabled, self._cancel.disabled = True, False
        self._render()
        task, device, size = self.task, self.device, self.size

        def work(job: Job) -> None:
            from workbench import evaluate

            for i, config in enumerate(configs):
                if job.cancelled:
                    return
                result = evaluate(task, sweep.candidate(config), device=device, size=size)
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
        self._status.value = f'<span style="color:#c62828">{esc(type(exc).__name__)}: {esc(str(exc))}</span>'

    def _cancelled(self) -> None:
        self._run.disabled, self._cancel.disabled = False, True
        self._status.value = f"cancelled after {len(self.rows)} configs"

    # ---- rendering -----------------------------------------------------------------------------------
    def _clock(self) -> str | None:
        clocks = {r["clock"] for r in self.rows if r["clock"]}
        return clocks.pop() if len(clocks) == 1 else None

    def _data(self) -> dict[str, Any]:
        knobs = self._knobs or ["x"]
        return heatmap_data(self.frame if self._knobs else sweep_frame([], knobs), knobs)

    def _render(self) -> None:
        data = self._data()
        fill_sweep_figure(self.figure, data, self._clock())
        self._best.value = best_html(data["best"])
        self._table.value = rows_html(self.frame) if self._knobs else ""

    def _static_parts(self) -> list[Any]:
        data = self._data()
        return [best_html(data["best"]), sweep_figure(data, clock=self._clock()), rows_html(self.frame)
                if self._knobs else ""]
