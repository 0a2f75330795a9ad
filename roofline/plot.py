"""The plotly roofline: log-log, x = arithmetic intensity (FLOP/byte), y = FLOP/s.

One roof per dtype (the memory slope up to the ridge, then flat at the compute peak): datasheet roofs dashed,
measured ceilings solid, the ridge points marked. One point per timed result, hover text with name, task,
shape, time, SOL% and flags (flagged points drawn as red crosses). plotly is imported inside the functions,
so `import roofline` works on a bare GPU node.

    fig = roofline_figure(results, spec=get_spec("H100 SXM"), ceilings=get_ceilings("cuda"))
    w = roofline_figure([], spec, as_widget=True); display(w)
    with w.batch_update():
        add_points(w, new_results)          # live update: appended to the one point trace
"""

from __future__ import annotations

import json
import math
from typing import Any

from workbench.errors import require

_COLORS = {"fp64": "#7f7f7f", "fp32": "#1f77b4", "tf32": "#9467bd", "fp16": "#d62728", "bf16": "#ff7f0e",
           "fp8": "#2ca02c", "int8": "#17becf"}
#: Name of the trace that holds result points (add_points appends to it).
POINTS = "results"


def _go():
    return require("plotly.graph_objects", "lab", "roofline plots", package="plotly")


def _num(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _records(points: Any) -> list[dict[str, Any]]:
    if points is None:
        return []
    if hasattr(points, "to_dict") and hasattr(points, "columns"):  # a DataFrame (e.g. Store.frame())
        return points.to_dict("records")
    return [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in points]


def point_rows(points: Any) -> list[dict[str, Any]]:
    """Plottable rows from Results, store rows/frames or dicts: those with FLOPs, bytes and a hardware time.
    Interpreter times and rows without counted work are left out (they have no place on a roofline)."""
    rows = []
    for r in _records(points):
        flops, nbytes = _num(r.get("flops")), _num(r.get("bytes"))
        timing = r.get("timing") if isinstance(r.get("timing"), dict) else {}
        t = _num(r.get("time_median_ms"))
        if t is None:
            t = _num(timing.get("median_ms"))
        clock = r.get("clock") or timing.get("clock")
        if not flops or not nbytes or not t or t <= 0 or clock == "interpreter":
            continue
        size = r.get("size")
        if isinstance(size, str):
            try:
                size = json.loads(size)
            except json.JSONDecodeError:
                pass
        flags = r.get("flags") or []
        if isinstance(flags, str):
            flags = json.loads(flags) if flags.startswith("[") else [flags]
        rows.append({"name": r.get("candidate_name") or r.get("name") or "?", "task": r.get("task", ""),
                     "intensity": flops / nbytes, "flops_per_s": flops / (t / 1e3), "bytes_per_s": nbytes / (t / 1e3),
                     "time_ms": t, "sol": _num(r.get("sol_fraction")), "bound": r.get("bound") or "",
                     "flags": list(flags), "size": size, "status": r.get("status", ""), "dtype": r.get("dtype") or ""})
    return rows


def _hover(r: dict[str, Any]) -> str:
    sol = f"{100 * r['sol']:.1f}%" if r["sol"] is not None else "n/a"
    size = ", ".join(f"{k}={v}" for k, v in r["size"].items()) if isinstance(r["size"], dict) else str(r["size"])
    text = (f"<b>{r['name']}</b> ({r['task']})<br>shape: {size}<br>time {r['time_ms']:.4g} ms, SOL {sol}"
            + (f" ({r['bound']}-bound)" if r["bound"] else "")
            + f"<br>{r['intensity']:.3g} FLOP/B, {r['flops_per_s'] / 1e12:.3g} TFLOP/s, "
            f"{r['bytes_per_s'] / 1e9:.4g} GB/s")
    if r["flags"]:
        text += f"<br>flags: {', '.join(r['flags'])}"
    return text


def point_trace(go: Any, rows: list[dict[str, Any]], name: str = POINTS):
    """One scatter trace for result rows (from `point_rows`)."""
    return go.Scatter(
        x=[r["intensity"] for r in rows], y=[r["flops_per_s"] for r in rows], mode="markers", name=name,
        text=[_hover(r) for r in rows], hovertemplate="%{text}<extra></extra>",
        marker={"size": 11, "symbol": ["x" if r["flags"] else "circle" for r in rows],
                "color": ["#b91c1c" if r["flags"] else "#111827" for r in rows],
                "line": {"width": 1, "color": "white"}})


def _roofs(source: Any) -> tuple[str, dict[str, float], float, bool]:
    """(label, peaks, bandwidth, measured) of a DeviceSpec or Ceilings."""
    if hasattr(source, "copy_bandwidth"):
        return f"{source.device_name} measured", dict(source.matmul_flops), source.copy_bandwidth, True
    measured = bool(getattr(source, "measured", False))
    label = f"{source.name} {'measured' if measured else 'datasheet'}"
    return label, dict(source.peaks), source.memory_bandwidth, measured


def roof_traces(go: Any, source: Any, dtypes: tuple[str, ...], x_range: tuple[float, float],
                dash: str | None = None) -> list[Any]:
    """Per dtype: the roof polyline (x_lo -> ridge -> x_hi, mode "lines"); plus one trace marking the ridges."""
    label, peaks, bandwidth, measured = _roofs(source)
    dash = dash or ("solid" if measured else "dash")
    lo, hi = x_range
    traces, ridges = [], []
    for key in dtypes:
        peak = peaks.get(key)
        if not peak:
            continue
        ridge = peak / bandwidth
        xs = [lo, ridge, hi] if lo < ridge < hi else [lo, hi]
        ys = [min(x * bandwidth, peak) for x in xs]
        traces.append(go.Scatter(
            x=xs, y=ys, mode="lines", name=f"{label} {key}", legendgroup=label,
            line={"dash": dash, "color": _COLORS.get(key, "#444"), "width": 2},
            hovertemplate=(f"{label} {key}: {peak / 1e12:.4g} TFLOP/s, {bandwidth / 1e12:.3g} TB/s, "
                           f"ridge {ridge:.3g} FLOP/B<extra></extra>")))
        ridges.append((ridge, peak, key))
    if ridges:
        traces.append(go.Scatter(
            x=[r[0] for r in ridges], y=[r[1] for r in ridges], mode="markers+text", name=f"{label} ridge points",
            legendgroup=label, showlegend=False, text=[f"{r[2]} ridge {r[0]:.3g}" for r in ridges],
            textposition="top left", textfont={"size": 9, "color": "#666"},
            marker={"size": 7, "symbol": "diamond-open", "color": [_COLORS.get(r[2], "#444") for r in ridges]},
            hovertemplate="ridge %{x:.3g} FLOP/B at %{y:.3g} FLOP/s<extra></extra>"))
    return traces


def _x_range(rows: list[dict[str, Any]], sources: list[Any], dtypes: tuple[str, ...]) -> tuple[float, float]:
    xs = [r["intensity"] for r in rows]
    for s in sources:
        _, peaks, bw, _ = _roofs(s)
        xs += [peaks[k] / bw for k in dtypes if peaks.get(k)]
    lo = min([0.05, *[x / 4 for x in xs if x > 0]])
    hi = max([2000.0, *[x * 4 for x in xs]])
    return lo, hi


def roofline_figure(points: Any = (), spec: Any = None, ceilings: Any = None,
                    dtypes: tuple[str, ...] = ("fp32", "fp16"), as_widget: bool = False, title: str | None = None):
    """A roofline go.Figure (go.FigureWidget with `as_widget=True`).

    points: Results, store rows or a store DataFrame (`Store.frame()`); spec: a DeviceSpec (datasheet roofs,
    dashed; a measured spec is drawn solid) or Ceilings; ceilings: measured Ceilings (solid); dtypes: which
    compute roofs to draw (keys fp64, fp32, tf32, fp16, bf16, fp8, int8).
    """
    go = _go()
    rows = point_rows(points)
    sources = [s for s in (spec, ceilings) if s is not None]
    x_range = _x_range(rows, sources, dtypes)
    fig = go.FigureWidget() if as_widget else go.Figure()
    for source in sources:
        for trace in roof_traces(go, source, dtypes, x_range):
            fig.add_trace(trace)
    fig.add_trace(point_trace(go, rows))
    names = [(_roofs(s)[0]) for s in sources]
    fig.update_layout(
        title=title or ("Roofline: " + " vs ".join(names) if names else "Roofline"),
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        yaxis={"type": "log", "title": {"text": "performance (FLOP/s)"}},
        legend={"orientation": "h", "y": -0.2}, hovermode="closest")
    return fig


def add_points(fig: Any, points: Any, name: str = POINTS) -> Any:
    """Append results to the figure's point trace `name` (created when missing). For a FigureWidget call it
    inside `fig.batch_update()` so a batch redraws once."""
    rows = point_rows(points)
    if not rows:
        return fig
    new = point_trace(_go(), rows, name)
    for trace in fig.data:
        if trace.name == name and trace.mode == "markers":
            trace.x = tuple(trace.x or ()) + tuple(new.x)
            trace.y = tuple(trace.y or ()) + tuple(new.y)
            trace.text = tuple(trace.text or ()) + tuple(new.text)
            trace.marker.symbol = tuple(trace.marker.symbol or ()) + tuple(new.marker.symbol)
            trace.marker.color = tuple(trace.marker.color or ()) + tuple(new.marker.color)
            return fig
    fig.add_trace(new)
    return fig
