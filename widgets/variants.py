"""VariantComparison: kernel variants across a size sweep, beside the eager and torch.compile references.

x is the size, one line per variant, y is time, GB/s or TFLOP/s. Picking a variant at a size ("show") shows
its source and its unified diff against another variant, which is usually the quickest way to see *why* one
is faster. Reference lines are drawn only when they were timed with the same clock as the variants: a
Triton-interpreter time is never put beside compiled code (docs/trust-boundary.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import traitlets as t

from widgets._html import esc, fmt_ms, plural
from widgets._records import Record, size_order, to_records
from widgets._runner import Job
from widgets.static import StaticMixin
from workbench.errors import require
from workbench.result import Result

w = require("ipywidgets", "lab", "the variant comparison")
go = require("plotly.graph_objects", "lab", "the variant comparison", package="plotly")

#: y-axis choices: label and axis title.
METRICS = {"time": "time (ms)", "GB/s": "achieved bandwidth (GB/s)", "TFLOP/s": "achieved TFLOP/s"}
REFERENCE, COMPILED = "reference (eager)", "torch.compile"


def metric_value(metric: str, ms: float | None, flops: float | None, nbytes: float | None) -> float | None:
    """Time in ms, or work / time; None when the time or the work is unknown."""
    if ms is None or ms <= 0:
        return None
    if metric == "time":
        return ms
    if metric == "GB/s":
        return None if nbytes is None else nbytes / (ms * 1e-3) / 1e9
    if metric == "TFLOP/s":
        return None if flops is None else flops / (ms * 1e-3) / 1e12
    raise KeyError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")


@dataclass
class Line:
    name: str
    kind: str  # "variant" or "reference"
    x: list[str] = field(default_factory=list)
    y: list[float | None] = field(default_factory=list)
    records: list[Record | None] = field(default_factory=list)


@dataclass
class Series:
    sizes: list[str]
    lines: list[Line]
    note: str = ""

    def line(self, name: str) -> Line:
        for line in self.lines:
            if line.name == name:
                return line
        raise KeyError(f"no line {name!r}; lines: {', '.join(x.name for x in self.lines)}")


def variant_series(records: list[Record], metric: str = "time") -> Series:
    """Lines to plot: each passing variant over the sizes it was timed at (latest result per size), then
    the eager and torch.compile references where their clock matches the variants'."""
    timed = [r for r in records if r.status == "ok" and r.time_ms is not None]
    by_label: dict[str, Any] = {}
    for r in timed:
        by_label.setdefault(r.size_label, r.size)
    sizes = sorted(by_label, key=lambda label: size_order(by_label[label]))
    lines: list[Line] = []
    for name in dict.fromkeys(r.name for r in timed):
        latest = {r.size_label: r for r in timed if r.name == name}
        line = Line(name, "variant")
        for label in sizes:
            if label in latest:
                r = latest[label]
                line.x.append(label)
                line.y.append(metric_value(metric, r.time_ms, r.flops, r.bytes))
                line.records.append(r)
        lines.append(line)
    hidden: dict[str, str] = {}
    for ref_name, ms_of, clock_of in ((REFERENCE, lambda r: r.ref_ms, lambda r: r.ref_clock),
                                      (COMPILED, lambda r: r.compile_ms, lambda r: r.compile_clock)):
        line = Line(ref_name, "reference")
        if ref_name == REFERENCE and any(r.clock == "interpreter" for r in timed):
            # Interpreter results carry no reference time at all: say why the line is missing.
            hidden[ref_name] = "the variants ran in the Triton interpreter, which is never compared with compiled code"
        for label in sizes:
            same = [r for r in timed if r.size_label == label and ms_of(r) is not None]
            # The reference is PyTorch: beside interpreter times it would compare the interpreter with
            # compiled code, so it is drawn only where the variant was timed by the same real clock.
            usable = [r for r in same if r.clock != "interpreter" and clock_of(r) in (None, r.clock)]
            for r in same:
                if not any(r is u for u in usable):
                    hidden[ref_name] = ("the variants ran in the Triton interpreter, which is never compared with "
                                        "compiled code" if r.clock == "interpreter" else
                                        "it was timed with a different clock than the variants")
            if usable:
                r = usable[-1]
                line.x.append(label)
                line.y.append(metric_value(metric, ms_of(r), r.flops, r.bytes))
                line.records.append(None)
        if line.x:
            lines.append(line)
    note = "; ".join(f"{name} not drawn: {why}" for name, why in hidden.items())
    return Series(sizes, lines, note)


def series_figure(series: Series, metric: str = "time", widget: bool = False) -> Any:
    from widgets._plot import new_figure

    fig = new_figure(widget)
    fill_figure(fig, series, metric)
    return fig


def fill_figure(fig: Any, series: Series, metric: str) -> None:
    """Replace the figure's traces with `series` (one trace per line, same order)."""
    styles = {REFERENCE: {"dash": "dash", "color": "#555"}, COMPILED: {"dash": "dot", "color": "#999"}}
    fig.data = []
    # showlegend on every line: plotly hides the legend of a one-line figure, which would leave its dots unnamed.
    fig.add_traces([
        go.Scatter(x=line.x, y=line.y, name=line.name, mode="lines+markers", showlegend=True,
                   line=styles.get(line.name, {}), marker={"size": 9 if line.kind == "variant" else 5},
                   hovertemplate=f"{esc(line.name)}<br>%{{x}}: %{{y:.4g}}<extra></extra>")
        for line in series.lines
    ])
    from widgets._plot import log_ticks, titled

    title = "Variants across sizes" + ("" if series.lines else ": no passing, timed results yet")
    yaxis = {"title": {"text": METRICS[metric]}, "type": "log" if metric == "time" else "linear",
             "tickmode": "auto", "tickvals": None, "ticktext": None}
    if metric == "time":
        yaxis.update(log_ticks(y for line in series.lines for y in line.y))
    titled(
        fig, title, height=380, legend={"orientation": "h", "y": -0.2},
        xaxis={"title": {"text": "size"}, "type": "category", "categoryorder": "array",
               "categoryarray": series.sizes},
        yaxis=yaxis,
        annotations=[{"text": esc(series.note), "xref": "paper", "yref": "paper", "x": 0, "y": 1.04,
                      "showarrow": False, "font": {"size": 10, "color": "#8d6e00"}, "xanchor": "left"}]
        if series.note else [],
    )


def source_diff(old: str, new: str, old_name: str = "a", new_name: str = "b") -> str:
    """Unified diff text from `old` to `new` ("" when identical)."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name, n=2))


def diff_html(diff: str) -> str:
    if not diff:
        return '<p class="kwb-diff-empty"><i>identical sources</i></p>'
    colors = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}
    lines = []
    for line in diff.splitlines():
        bg = colors.get(line[:1], "") if not line.startswith(("+++", "---")) else "#f0f0f0"
        lines.append(f'<span style="background:{bg};display:block">{esc(line) or "&nbsp;"}</span>')
    return (f'<pre class="kwb-diff" style="font-size:11px;max-height:24em;overflow:auto">{"".join(lines)}</pre>')


def selection_html(record: Record | None, source: str, other: str | None, other_source: str | None) -> str:
    if record is None:
        return '<p class="kwb-selection-empty"><i>Pick a variant and size under "show" to see its source and diff.</i></p>'
    head = (f'<div class="kwb-selection" data-kwb-variant="{esc(record.name)}"><b>{esc(record.name)}</b> at '
            f"{esc(record.size_label)}: {esc(fmt_ms(record.time_ms))}"
            + (f" ({esc(record.clock)} clock)" if record.clock else "") + "</div>")
    if other and other_source is not None and other != record.name:
        body = f"<div>diff against <b>{esc(other)}</b>:</div>" + diff_html(source_diff(other_source, source, other,
                                                                                        record.name))
    else:
        body = (f'<pre class="kwb-variant-source" style="font-size:11px;max-height:24em;overflow:auto">'
                f"{esc(source)}</pre>")
    return head + body


class VariantComparison(StaticMixin, w.VBox):
    """Passing variants over sizes; y switchable between time, GB/s and TFLOP/s; "show" picks a variant at a
    size for its source and a diff against the variant chosen in "diff against"."""

    metric = t.Enum(list(METRICS), default_value="time", help="What the y axis shows.")

    _static_title = "Kernel Workbench: variants"

    def __init__(self, results: Any = None, *, source_lookup: Callable[[str], str | None] | None = None,
                 task: Any = None, candidate: Callable[[], Any] | None = None, device: str | None = None,
                 **kwargs: Any):
        self._records: list[Record] = to_records(results)
        self.source_lookup = source_lookup
        self.task, self.candidate_factory, self.device = task, candidate, device
        self.selected: Record | None = None
        self.job: Job | None = None
        self._callbacks: list[Callable[[Result], Any]] = []
        # Buttons sized by their labels: a fixed width cut "TFLOP/s" to "TFLO..." and "Time over sizes" short.
        self._metric = w.ToggleButtons(options=list(METRICS), value="time", style={"button_width": "auto"})
        self._metric.add_class("kwb-variants-metric")
        self._pick = w.Dropdown(options=[("(pick a variant)", None)], value=None, description="show",
                                layout=w.Layout(width="320px"))
        self._pick.add_class("kwb-variants-pick")
        self._other = w.Dropdown(options=[("(none)", "")], value="", description="diff against",
                                 layout=w.Layout(width="320px"))
        self._sweep = w.Button(description="Time over sizes", icon="line-chart", layout=w.Layout(width="auto"),
                               tooltip="Evaluate the editor's kernel at every size of the task's sweep")
        self._sweep.add_class("kwb-variants-sizes")
        self._progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="160px", visibility="hidden"))
        self._status = w.HTML()
        self.figure = series_figure(variant_series([]), widget=True)
        self._picking = False
        self._selection = w.HTML(selection_html(None, "", None, None))
        super().__init__(**kwargs)
        self.add_class("kwb-variants")
        controls = [self._metric, self._pick, self._other]
        if task is not None and candidate is not None:
            controls += [self._sweep, self._progress, self._status]
        self.children = [w.HBox(controls, layout=w.Layout(flex_flow="row wrap")), self.figure.view, self._selection]
        t.link((self, "metric"), (self._metric, "value"))
        self.observe(lambda _: self._render(), "metric")
        self._other.observe(lambda _: self._render_selection(), "value")
        self._pick.observe(self._on_pick, "value")
        self._sweep.on_click(lambda _: self.run_sizes())
        self._render()

    # ---- data ----------------------------------------------------------------------------------------
    @property
    def series(self) -> Series:
        return variant_series(self._records, self.metric)

    def add(self, result: Result | Record) -> None:
        self._records.extend(to_records([result]))
        self._render()

    def set_results(self, results: Any) -> None:
        self._records = to_records(results)
        self.selected = None
        self._render()

    def source_of(self, record: Record) -> str:
        if record.source:
            return record.source
        if self.source_lookup is not None and record.source_hash:
            try:
                return self.source_lookup(record.source_hash) or ""
            except Exception:  # noqa: BLE001 - a missing source shows as empty, never breaks the view
                return ""
        return ""

    def _latest_source(self, name: str) -> str | None:
        for r in reversed(self._records):
            if r.name == name:
                return self.source_of(r)
        return None

    # ---- interaction ---------------------------------------------------------------------------------
    def select(self, name: str, size_label: str | None = None) -> Record | None:
        """Show the source of variant `name` (at `size_label`, default its largest size) and its diff."""
        line = self.series.line(name)
        if line.kind != "variant":
            return None
        index = line.x.index(size_label) if size_label is not None else len(line.x) - 1
        self.selected = line.records[index]
        self._show_pick((name, line.x[index]))
        if self._other.value in ("", name):
            others = [n for n, _ in self._variant_options() if n not in ("(none)", name)]
            if others:
                self._other.value = others[0]
        self._render_selection()
        return self.selected

    def _on_pick(self, change: Any) -> None:
        if not self._picking and change["new"] is not None:
            self.select(*change["new"])

    def _show_pick(self, value: tuple[str, str] | None) -> None:
        """Point the "show" picker at `value` without selecting again."""
        self._picking = True
        try:
            self._pick.value = value if value in [v for _, v in self._pick.options] else None
        finally:
            self._picking = False

    def run_sizes(self, sizes: list[dict[str, Any]] | None = None, block: bool = False) -> None:
        """Evaluate the current candidate at each size (default: the task's sweep for the device)."""
        from workbench import evaluate

        if self.task is None or self.candidate_factory is None or (self.job is not None and self.job.running):
            return
        task, cand, device = self.task, self.candidate_factory(), self.device
        kind = "gpu" if (device or "").startswith("cuda") else "cpu"
        sizes = sizes or task.sweep.get(kind) or [task.size(None, device or "cpu")]
        self._progress.max, self._progress.value = len(sizes), 0
        self._progress.layout.visibility = "visible"
        self._status.value = f"timing {esc(cand.name)} at {len(sizes)} sizes…"

        def work(job: Job) -> list[Result]:
            out = []
            for i, size in enumerate(sizes):
                if job.cancelled:
                    break
                result = evaluate(task, cand, device=device, size=size, cancel=job.cancel_event)
                out.append(result)
                job.step(i + 1, len(sizes))
            return out

        def done(results: list[Result]) -> None:
            self._progress.layout.visibility = "hidden"
            ok = sum(r.ok for r in results)
            self._status.value = f"{ok} of {plural(len(results), 'size')} passed"
            for r in results:
                for callback in self._callbacks:
                    callback(r)
            self._records.extend(to_records(results))
            self._render()

        def progress(done_steps: int, total: int, elapsed: float) -> None:
            self._progress.value = done_steps

        def failed(exc: BaseException) -> None:
            self._progress.layout.visibility = "hidden"
            self._status.value = f"failed: {esc(str(exc))}"

        if block:
            done(work(Job(work)))
            return
        self.job = Job(work, on_done=done, on_error=failed, on_progress=progress).start()

    def on_result(self, callback: Callable[[Result], Any]) -> None:
        """Called with every result `run_sizes` produces (the Workbench stores them)."""
        self._callbacks.append(callback)

    # ---- rendering -----------------------------------------------------------------------------------
    def _variant_options(self) -> list[tuple[str, str]]:
        names = [line.name for line in self.series.lines if line.kind == "variant"]
        return [("(none)", ""), *[(n, n) for n in names]]

    def _render(self) -> None:
        series = self.series
        with self.figure.batch_update():
            fill_figure(self.figure, series, self.metric)
        points = [(f"{line.name} at {x}", (line.name, x)) for line in series.lines if line.kind == "variant"
                  for x in line.x]
        self._picking = True
        try:
            self._pick.options = [("(pick a variant)", None), *points]
        finally:
            self._picking = False
        self._show_pick((self.selected.name, self.selected.size_label) if self.selected else None)
        current = self._other.value
        options = self._variant_options()
        self._other.options = options
        self._other.value = current if current in [v for _, v in options] else ""
        self._render_selection()

    def _render_selection(self) -> None:
        rec = self.selected
        other = self._other.value or None
        self._selection.value = selection_html(rec, self.source_of(rec) if rec else "", other,
                                               self._latest_source(other) if other else None)

    def _static_parts(self) -> list[Any]:
        return [series_figure(self.series, self.metric), self._selection.value]
