"""The plotly figures of a study report: time and speedup against size with 95% CI bands, and the roofline.

Figures only ever put comparable numbers on one axis: one trace per candidate, dtype and device, sizes in
order of problem size. The roofline takes only GPU times (CUDA events) and draws them against the roofs of
the GPU that measured them; interpreter and CPU times have no roofline and the report says so in words.
"""

from __future__ import annotations

from typing import Any

from widgets._plot import log_ticks
from widgets.report_data import missing, records, size_label, size_order, text
from workbench.errors import require

#: Colours per trace, reused across a report so a candidate keeps its colour from figure to figure.
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]


def _go():
    return require("plotly.graph_objects", "lab", "study reports", package="plotly")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _series(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped into traces; the trace name carries dtype/device only when those vary in the task."""
    vary_dtype = len({text(r.get("dtype")) for r in rows}) > 1
    vary_device = len({text(r.get("device_name") or r.get("device")) for r in rows}) > 1
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        name = text(r.get("candidate_name"), "?")
        if vary_dtype:
            name += f" · {text(r.get('dtype'))}"
        if vary_device:
            name += f" · {text(r.get('device_name') or r.get('device'))}"
        out.setdefault(name, []).append(r)
    return out


def _line_with_band(fig, go, name: str, color: str, xs: list[str], ys: list[float], lows: list[float | None],
                    highs: list[float | None], unit: str) -> None:
    """A line with markers, a shaded band between the CI bounds where known, and error bars on each point. The
    line is always in the legend (plotly would hide the legend of a one-line figure)."""
    have_ci = [lo is not None and hi is not None for lo, hi in zip(lows, highs, strict=True)]
    if sum(have_ci) >= 2:
        bx = [x for x, ok in zip(xs, have_ci, strict=True) if ok]
        lo = [v for v, ok in zip(lows, have_ci, strict=True) if ok]
        hi = [v for v, ok in zip(highs, have_ci, strict=True) if ok]
        # mode "lines": left to its default, plotly marks every vertex of a short polygon with a dot in the next
        # colour of its palette, dots no legend entry names.
        fig.add_trace(go.Scatter(x=bx + bx[::-1], y=hi + lo[::-1], mode="lines", fill="toself",
                                 fillcolor=_rgba(color, 0.15), line={"width": 0}, hoverinfo="skip", showlegend=False,
                                 legendgroup=name, name=f"{name} 95% CI"))
    plus = [(hi - y) if hi is not None else 0 for y, hi in zip(ys, highs, strict=True)]
    minus = [(y - lo) if lo is not None else 0 for y, lo in zip(ys, lows, strict=True)]
    ci_text = [f"[{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else "no CI"
               for lo, hi in zip(lows, highs, strict=True)]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="lines+markers", name=name, legendgroup=name, showlegend=True, line={"color": color},
        error_y={"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1,
                 "width": 3, "color": color},
        customdata=ci_text, hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.4g}} {unit} (95% CI %{{customdata}})<extra></extra>"))


def _num(value: Any) -> float | None:
    return None if missing(value) else float(value)


def _times(rows: list[dict[str, Any]]) -> list[float]:
    """Every median and CI bound of `rows` in ms: what a log time axis must label."""
    keys = ("time_median_ms", "time_ci95_low_ms", "time_ci95_high_ms")
    return [v for r in rows for k in keys if (v := _num(r.get(k))) is not None]


def time_figure(task: str, rows: list[dict[str, Any]]):
    """Median time against size per candidate, 95% CI as a band and error bars; None without timed results
    or when there is a single point to show."""
    go = _go()
    timed = [r for r in rows if r.get("status") == "ok" and not missing(r.get("time_median_ms"))]
    if not timed:
        return None
    sizes = sorted({size_label(r.get("size")): size_order(r.get("size")) for r in timed}.items(), key=lambda kv: kv[1])
    order = [label for label, _ in sizes]
    series = _series(timed)
    if len(order) == 1 and len(series) == 1:
        return None  # one number: the tables say it better than a full-size figure
    fig = go.Figure()
    for i, (name, group) in enumerate(sorted(series.items())):
        group = sorted(group, key=lambda r: size_order(r.get("size")))
        _line_with_band(fig, go, name, PALETTE[i % len(PALETTE)], [size_label(r.get("size")) for r in group],
                        [float(r["time_median_ms"]) for r in group], [_num(r.get("time_ci95_low_ms")) for r in group],
                        [_num(r.get("time_ci95_high_ms")) for r in group], "ms")
    clocks = sorted({text(r.get("clock")) for r in timed} - {""})
    note = " · interpreter times: relative only, not hardware speed" if clocks == ["interpreter"] else ""
    fig.update_layout(title=f"{task}: median time by size ({', '.join(clocks) or 'unknown clock'}){note}",
                      xaxis={"title": "size", "type": "category", "categoryorder": "array", "categoryarray": order},
                      yaxis={"title": "time (ms), median and 95% CI", "type": "log", **log_ticks(_times(timed))},
                      height=420 if len(order) > 1 else 320,
                      legend={"orientation": "h", "y": -0.25}, margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def speedup_figure(task: str, rows: list[dict[str, Any]]):
    """Speedup against size per candidate with its 95% CI band; None when no result has a speedup
    (interpreter or CPU-only runs)."""
    go = _go()
    rated = [r for r in rows if r.get("status") == "ok" and not missing(r.get("speedup"))]
    if not rated:
        return None
    order = [label for label, _ in sorted({size_label(r.get("size")): size_order(r.get("size"))
                                           for r in rated}.items(), key=lambda kv: kv[1])]
    fig = go.Figure()
    for i, (name, group) in enumerate(sorted(_series(rated).items())):
        group = sorted(group, key=lambda r: size_order(r.get("size")))
        _line_with_band(fig, go, name, PALETTE[i % len(PALETTE)], [size_label(r.get("size")) for r in group],
                        [float(r["speedup"]) for r in group], [_num(r.get("speedup_ci_low")) for r in group],
                        [_num(r.get("speedup_ci_high")) for r in group], "x")
    fig.add_hline(y=1.0, line={"dash": "dash", "color": "#6b7280"}, annotation_text="reference (eager)",
                  annotation_position="top left")
    fig.update_layout(title=f"{task}: speedup over the eager reference by size",
                      xaxis={"title": "size", "type": "category", "categoryorder": "array", "categoryarray": order},
                      yaxis={"title": "speedup (x), with 95% CI"}, height=420,
                      legend={"orientation": "h", "y": -0.25}, margin={"l": 60, "r": 20, "t": 60, "b": 40})
    return fig


def roofline_sections(frame, projection_gpu: str | None = None) -> list[tuple[str, Any, str]]:
    """(title, figure or None, note) per GPU that measured results; without any, one projection of every task's
    counted work on a datasheet GPU (`projection_gpu`, default H100 SXM).

    Only CUDA-event times of results with counted work go on a measured roofline, and only against the roofs of
    the GPU named in their results: interpreter and CPU wall-clock times never become points; their tasks are
    projected instead, labelled as such.
    """
    rows = records(frame)
    gpu = [r for r in rows if r.get("clock") == "cuda-events" and str(r.get("device", "")).startswith("cuda")]
    others = len([r for r in rows if r.get("time_median_ms") is not None]) - len(gpu)
    if not gpu:
        return [projection_section(rows, others, projection_gpu)]
    from roofline.plot import roofline_figure
    from roofline.specs import match_device_name

    sections = []
    by_device: dict[str, list[dict[str, Any]]] = {}
    for r in gpu:
        by_device.setdefault(text(r.get("device_name"), "unknown GPU"), []).append(r)
    for name, group in sorted(by_device.items()):
        spec = match_device_name(name)
        plotted = [r for r in group if not missing(r.get("flops")) and not missing(r.get("bytes"))]
        note = f"{len(plotted)} of {len(group)} GPU result(s) have counted FLOPs and bytes and are plotted."
        if others:
            note += f" {others} interpreter/CPU result(s) are left out: they have no place on a GPU roofline."
        if spec is None:
            note += f" {name} has no datasheet entry, so no roofs are drawn; `kwb ceilings` measures them."
        dtypes = tuple(sorted({_dtype_key(r.get("dtype")) for r in plotted} - {None})) or ("fp32",)
        fig = roofline_figure(plotted, spec=spec, dtypes=dtypes, title=f"Roofline: {name}")
        fig.update_layout(height=480)
        sections.append((f"Roofline: {name}", fig, note))
    return sections


def _dtype_key(dtype: Any) -> str | None:
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64"}.get(text(dtype))


def projection_section(rows: list[dict[str, Any]], timed: int, gpu: str | None = None) -> tuple[str, Any, str]:
    """The roofline of a run no GPU timed: each task at its counted intensity on a datasheet GPU."""
    from roofline.plot import projection_figure
    from roofline.projection import resolve_gpu

    spec = resolve_gpu(gpu)
    why = (f"{timed} timed result(s) came from the Triton interpreter or the CPU wall clock, which are not hardware "
           "a GPU roofline describes" if timed else "no result was timed on a GPU")
    fig, left = projection_figure(rows, spec)
    if not [t for t in fig.data if (t.meta or {}).get("projection")]:
        return ("Roofline", None, f"No roofline: {why}, and no result has counted work to project. Rerun the "
                                  "study on a GPU for one.")
    note = (f"No measured roofline: {why}. Instead each task is placed at its counted arithmetic intensity (FLOPs / "
            f"minimal bytes, at the size it ran) on the {spec.name} datasheet roofline: a projection of where its "
            "work would sit there (memory- or compute-bound, and the least time it could take), not a measured "
            "time. Rerun the study on a GPU for measured points.")
    if left:
        note += f" {len(left)} result(s) without counted work are not placed."
    return (f"Roofline: projection on {spec.name}", fig, note)
