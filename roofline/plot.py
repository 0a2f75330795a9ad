"""The plotly roofline: log-log, memory and compute roofs per dtype (datasheet dashed, measured solid),
one point per result with hover text (name, shape, time, SOL%, flags)."""

from __future__ import annotations

import json
from typing import Any

from workbench.errors import require

_COLORS = {"fp32": "#1f77b4", "tf32": "#9467bd", "fp16": "#d62728", "bf16": "#ff7f0e", "fp8": "#2ca02c", "fp64": "#7f7f7f"}


def _points(points: Any) -> list[dict[str, Any]]:
    """Rows with name, intensity, flops_per_s, time, sol, flags, size from Results or a store DataFrame."""
    rows = []
    if hasattr(points, "to_dict") and hasattr(points, "columns"):
        records = points.to_dict("records")
    else:
        records = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in points]
    for r in records:
        flops, nbytes = r.get("flops"), r.get("bytes")
        t = r.get("time_median_ms")
        if t is None and isinstance(r.get("timing"), dict):
            t = r["timing"].get("median_ms")
        if not flops or not nbytes or not t:
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
        rows.append({"name": r.get("candidate_name", "?"), "task": r.get("task", ""), "intensity": flops / nbytes,
                     "flops_per_s": flops / (t / 1e3), "time_ms": t, "sol": r.get("sol_fraction"), "flags": flags,
                     "size": size, "status": r.get("status", "")})
    return rows


def _roof_traces(go, name: str, peaks: dict[str, float], bandwidth: float, dash: str, x_range: tuple[float, float]):
    traces = []
    lo, hi = x_range
    for key, peak in peaks.items():
        ridge = peak / bandwidth
        xs = [lo, ridge, hi]
        ys = [lo * bandwidth, peak, peak]
        traces.append(go.Scatter(x=xs, y=ys, mode="lines", name=f"{name} {key}",
                                 line={"dash": dash, "color": _COLORS.get(key, "#444")},
                                 hovertemplate=f"{name} {key}: {peak / 1e12:.1f} TFLOP/s, "
                                               f"{bandwidth / 1e12:.2f} TB/s, ridge {ridge:.0f} FLOP/B<extra></extra>"))
    return traces


def point_trace(go, rows: list[dict[str, Any]], name: str = "results"):
    text = []
    for r in rows:
        sol = f"{100 * r['sol']:.1f}%" if r["sol"] is not None else "n/a"
        text.append(f"{r['name']} ({r['task']})<br>size {r['size']}<br>{r['time_ms']:.4g} ms, SOL {sol}"
                    f"<br>{r['intensity']:.2f} FLOP/B, {r['flops_per_s'] / 1e12:.3g} TFLOP/s"
                    + (f"<br>flags: {', '.join(r['flags'])}" if r["flags"] else ""))
    return go.Scatter(x=[r["intensity"] for r in rows], y=[r["flops_per_s"] for r in rows], mode="markers", name=name,
                      text=text, hovertemplate="%{text}<extra></extra>",
                      marker={"size": 11, "symbol": ["x" if r["flags"] else "circle" for r in rows],
                              "color": ["#b91c1c" if r["flags"] else "#111827" for r in rows]})


def roofline_figure(points: Any = (), spec: Any = None, ceilings: Any = None, dtypes: tuple[str, ...] = ("fp32", "fp16"),
                    as_widget: bool = False, title: str | None = None):
    """A roofline go.Figure (or go.FigureWidget with as_widget=True) for `points` (Results or a store frame)."""
    go = require("plotly.graph_objects", "lab", "roofline plots", package="plotly")
    rows = _points(points)
    xs = [r["intensity"] for r in rows] or [1.0]
    x_range = (min(min(xs) / 4, 0.05), max(max(xs) * 4, 2000.0))
    fig = go.FigureWidget() if as_widget else go.Figure()
    if spec is not None:
        peaks = {k: spec.peaks[k] for k in dtypes if k in spec.peaks}
        for t in _roof_traces(go, f"{spec.name} datasheet", peaks, spec.memory_bandwidth, "dash", x_range):
            fig.add_trace(t)
    if ceilings is not None:
        peaks = {k: v for k, v in ceilings.matmul_flops.items() if k in dtypes}
        for t in _roof_traces(go, f"{ceilings.device_name} measured", peaks, ceilings.copy_bandwidth, "solid", x_range):
            fig.add_trace(t)
    fig.add_trace(point_trace(go, rows))
    fig.update_layout(title=title or "Roofline", xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
                      yaxis={"type": "log", "title": "FLOP/s"}, legend={"orientation": "h"})
    return fig


def add_points(fig: Any, points: Any, name: str = "results") -> Any:
    """Append results to a figure's point trace (inside fig.batch_update() for a FigureWidget)."""
    go = require("plotly.graph_objects", "lab", "roofline plots", package="plotly")
    rows = _points(points)
    if not rows:
        return fig
    new = point_trace(go, rows, name)
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
