"""The plotly roofline, drawn the way Nsight Compute draws one: log-log, x = arithmetic intensity (FLOP/byte),
y = FLOP/s in units that fit the device (GFLOP/s on a CPU, TFLOP/s on a GPU), every roof labelled with its
value and where it comes from ("HBM 3.35 TB/s (datasheet)", "FP16 tensor 989 TFLOP/s (datasheet)"), the
ridge points marked, one point per hardware-timed result with its task, candidate, size, time, SOL% and bound.

A point is drawn only against roofs of the hardware it ran on: Triton-interpreter times are not hardware,
and a CPU time under GPU roofs (or an A100 time under H100 roofs) says nothing. `split_points` returns the
results left out with the reason, for a view to list beside the plot. plotly is imported inside the
functions, so `import roofline` works on a bare GPU node.

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

_COLORS = {"fp64": "#7f7f7f", "fp64_tensor": "#525252", "fp32": "#1f77b4", "tf32": "#9467bd", "fp16": "#d62728",
           "bf16": "#ff7f0e", "fp8": "#2ca02c", "int8": "#17becf"}
_GPU_LABELS = {"fp64": "FP64", "fp64_tensor": "FP64 tensor", "fp32": "FP32", "tf32": "TF32 tensor",
               "fp16": "FP16 tensor", "bf16": "BF16 tensor", "fp8": "FP8 tensor", "int8": "INT8 tensor"}
#: Name of the trace that holds result points (add_points appends to it).
POINTS = "results"
#: Plotly's toolbar on hover only, so it never covers the title.
PLOT_CONFIG = {"displayModeBar": "hover", "displaylogo": False}


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


# ---- which hardware: roofs and results -------------------------------------------------------------------------

def _gpu_entry(name: str) -> Any:
    """The datasheet entry a device name belongs to (None when not in the table)."""
    from roofline.specs import match_device_name

    return match_device_name(name) if name else None


class Roofs:
    """One source of roofs (a DeviceSpec or Ceilings), normalized: name, peaks per dtype, bandwidth, origin."""

    def __init__(self, source: Any):
        if hasattr(source, "copy_bandwidth"):  # Ceilings
            self.name, self.peaks, self.bandwidth = source.device_name, dict(source.matmul_flops), source.copy_bandwidth
            self.measured = True
            device = str(getattr(source, "device", "") or "")
            self.kind = ("cpu" if device.startswith("cpu") else "gpu" if device.startswith("cuda")
                         else "cpu" if "cpu" in self.name.lower() else None)
        else:  # DeviceSpec
            self.name, self.peaks, self.bandwidth = source.name, dict(source.peaks), source.memory_bandwidth
            self.measured = bool(getattr(source, "measured", False))
            self.kind = "cpu" if self.name.lower().startswith("cpu") else "gpu"
        self.origin = "measured" if self.measured else "datasheet"
        self.entry = _gpu_entry(self.name) if self.kind == "gpu" else None
        self.label = f"{self.name} {self.origin}"

    def memory_label(self) -> str:
        lower = self.name.lower()
        memory = "DRAM" if self.kind == "cpu" else "GDDR" if any(t in lower for t in ("l4", "l40", "rtx", "4090")) \
            else "HBM" if self.kind == "gpu" else "memory"
        return f"{memory} {fmt_rate(self.bandwidth, 'B/s')} ({self.origin})"

    def compute_label(self, key: str) -> str:
        name = _GPU_LABELS.get(key, key.upper()) if self.kind == "gpu" else f"{key.upper()} matmul"
        unit = "OP/s" if key == "int8" else "FLOP/s"
        return f"{name} {fmt_rate(self.peaks[key], unit)} ({self.origin})"


def fmt_rate(value: float, unit: str) -> str:
    """3.35e12, "B/s" -> "3.35 TB/s"; 9.894e14, "FLOP/s" -> "989 TFLOP/s"."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def row_kind(r: dict[str, Any]) -> str | None:
    timing = r.get("timing") if isinstance(r.get("timing"), dict) else {}
    if (r.get("clock") or timing.get("clock")) == "interpreter":
        return "interpreter"
    device = str(r.get("device") or "")
    return "gpu" if device.startswith("cuda") else "cpu" if device.startswith("cpu") else None


def _row(r: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(plottable row, "") or (None, why it cannot be a point at all)."""
    timing = r.get("timing") if isinstance(r.get("timing"), dict) else {}
    flops, nbytes = _num(r.get("flops")), _num(r.get("bytes"))
    t = _num(r.get("time_median_ms"))
    t = t if t is not None else _num(timing.get("median_ms"))
    if row_kind(r) == "interpreter":
        return None, "Triton interpreter time: not hardware"
    if not t or t <= 0:
        return None, f"not timed ({r.get('status') or 'no time'})"
    if not flops or not nbytes:
        return None, "no FLOP/byte count"
    size = r.get("size")
    if isinstance(size, str):
        try:
            size = json.loads(size)
        except json.JSONDecodeError:
            pass
    flags = r.get("flags") or []
    if isinstance(flags, str):
        flags = json.loads(flags) if flags.startswith("[") else [flags]
    return {"name": r.get("candidate_name") or r.get("name") or "?", "task": r.get("task", ""),
            "intensity": flops / nbytes, "flops_per_s": flops / (t / 1e3), "bytes_per_s": nbytes / (t / 1e3),
            "time_ms": t, "sol": _num(r.get("sol_fraction")), "bound": r.get("bound") or "", "flags": list(flags),
            "size": size, "status": r.get("status", ""), "dtype": r.get("dtype") or "",
            "kind": row_kind(r), "device": r.get("device") or "", "device_name": r.get("device_name") or ""}, ""


def split_points(points: Any, roofs: list[Roofs] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows drawn, rows left out with a `reason`). With roofs, a row is drawn only when it ran on that
    hardware: same kind (GPU or CPU) and, when both names are in the datasheet table, the same GPU."""
    kind = next((r.kind for r in roofs or [] if r.kind), None)
    entry = next((r.entry for r in roofs or [] if r.entry is not None), None)
    drawn, left = [], []
    for r in _records(points):
        row, why = _row(r)
        if row is not None and kind is not None and row["kind"] != kind:
            why = f"ran on {row['device_name'] or row['device'] or 'another device'}, not on this {kind.upper()}"
        elif row is not None and entry is not None and _gpu_entry(row["device_name"]) not in (None, entry):
            why = f"ran on {row['device_name']}, not on {entry.name}"
        if why:
            left.append({"name": r.get("candidate_name") or r.get("name") or "?", "task": r.get("task", ""),
                         "device": r.get("device_name") or r.get("device") or "", "status": r.get("status", ""),
                         "reason": why})
        else:
            drawn.append(row)  # type: ignore[arg-type]
    return drawn, left


def point_rows(points: Any) -> list[dict[str, Any]]:
    """Rows that can be points at all (a hardware time and counted work), whatever the roofs."""
    return split_points(points)[0]


# ---- traces ---------------------------------------------------------------------------------------------------

def _hover(r: dict[str, Any]) -> str:
    sol = f"{100 * r['sol']:.1f}%" if r["sol"] is not None else "n/a"
    size = ", ".join(f"{k}={v}" for k, v in r["size"].items()) if isinstance(r["size"], dict) else str(r["size"])
    text = (f"<b>{r['name']}</b> ({r['task']})<br>shape: {size}<br>time {r['time_ms']:.4g} ms, SOL {sol}"
            + (f" ({r['bound']}-bound)" if r["bound"] else "")
            + f"<br>{r['intensity']:.3g} FLOP/B, {fmt_rate(r['flops_per_s'], 'FLOP/s')}, "
            f"{fmt_rate(r['bytes_per_s'], 'B/s')}" + (f"<br>{r['device_name']}" if r.get("device_name") else ""))
    if r["flags"]:
        text += f"<br>flags: {', '.join(r['flags'])}"
    return text


def point_trace(go: Any, rows: list[dict[str, Any]], name: str = POINTS):
    """One scatter trace for result rows (from `split_points`); flagged results are red crosses."""
    return go.Scatter(
        x=[r["intensity"] for r in rows], y=[r["flops_per_s"] for r in rows], mode="markers", name=name,
        text=[_hover(r) for r in rows], hovertemplate="%{text}<extra></extra>",
        marker={"size": 11, "symbol": ["x" if r["flags"] else "circle" for r in rows],
                "color": ["#b91c1c" if r["flags"] else "#111827" for r in rows],
                "line": {"width": 1, "color": "white"}})


def roof_traces(go: Any, source: Any, dtypes: tuple[str, ...], x_range: tuple[float, float],
                dash: str | None = None, textposition: str = "bottom right") -> list[Any]:
    """Per dtype: the roof polyline (x_lo -> ridge -> x_hi, mode "lines"), named by its compute roof; plus one
    trace marking the ridge points (mode "markers+text")."""
    roofs = source if isinstance(source, Roofs) else Roofs(source)
    dash = dash or ("solid" if roofs.measured else "dash")
    lo, hi = x_range
    traces, ridges = [], []
    for key in dtypes:
        peak = roofs.peaks.get(key)
        if not peak:
            continue
        ridge = peak / roofs.bandwidth
        xs = [lo, ridge, hi] if lo < ridge < hi else [lo, hi]
        ys = [min(x * roofs.bandwidth, peak) for x in xs]
        traces.append(go.Scatter(
            x=xs, y=ys, mode="lines", name=roofs.compute_label(key), legendgroup=roofs.label, showlegend=False,
            line={"dash": dash, "color": _COLORS.get(key, "#444"), "width": 2},
            hovertemplate=(f"{roofs.compute_label(key)}<br>{roofs.memory_label()}<br>ridge {ridge:.3g} FLOP/byte"
                           "<extra></extra>")))
        ridges.append((ridge, peak, key))
    if ridges:
        traces.append(go.Scatter(
            x=[r[0] for r in ridges], y=[r[1] for r in ridges], mode="markers+text", name=f"{roofs.label} ridge points",
            legendgroup=roofs.label, showlegend=False, text=[f"ridge {r[0]:.3g}" for r in ridges],
            textposition=textposition, textfont={"size": 10, "color": "#555"},
            marker={"size": 9, "symbol": "diamond", "color": [_COLORS.get(r[2], "#444") for r in ridges],
                    "line": {"width": 1, "color": "white"}},
            hovertemplate="ridge point: %{x:.3g} FLOP/byte at %{customdata}<extra></extra>",
            customdata=[fmt_rate(r[1], "FLOP/s") for r in ridges]))
    return traces


def _roof_labels(roofs: Roofs, dtypes: tuple[str, ...], x_range: tuple[float, float], slot: int,
                 lowest_bandwidth: float) -> list[dict]:
    """Direct labels, as Nsight Compute draws them. Each compute roof is labelled at its own height just left
    of its ridge, where the space above the memory slope is empty (so a label never runs into the ridge
    marks or off the right edge): the first source's above its roof, a second source's below (further left,
    clear of the slope); the memory roof under its slope, where a rising line never crosses the text
    (labels of several sources stack downwards from the lowest slope)."""
    lo, _ = x_range
    labels = []
    for key in dtypes:
        peak = roofs.peaks.get(key)
        if peak:
            ridge = peak / roofs.bandwidth
            labels.append({"x": math.log10(ridge), "y": math.log10(peak), "text": roofs.compute_label(key),
                           "xanchor": "right", "yanchor": "top" if slot else "bottom", "xshift": -30 if slot else -10,
                           "yshift": -1 if slot else 1, "showarrow": False,
                           "font": {"size": 11, "color": _COLORS.get(key, "#444")}})
    x = lo * 2
    labels.append({"x": math.log10(x), "y": math.log10(x * lowest_bandwidth), "text": roofs.memory_label(),
                   "xanchor": "left", "yanchor": "top", "yshift": -6 - 16 * slot, "xshift": 6, "showarrow": False,
                   "font": {"size": 11, "color": "#333"}})
    return labels


def _decade_ticks(lo: float, hi: float, scale: float = 1.0) -> tuple[list[float], list[str]]:
    vals = [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    return vals, [f"{v / scale:g}" for v in vals]


def _y_unit(peak: float) -> tuple[float, str]:
    for scale, unit in ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
        if peak >= 10 * scale:
            return scale, unit
    return 1.0, "FLOP/s"


def _ranges(rows: list[dict[str, Any]], roofs: list[Roofs], dtypes: tuple[str, ...],
            projected: tuple[Any, ...] = ()) -> tuple[tuple, tuple]:
    xs = [r["intensity"] for r in rows] + [p.intensity for p in projected]
    ys = [r["flops_per_s"] for r in rows] + [p.attainable_flops_per_s for p in projected]
    peaks = [s.peaks[k] for s in roofs for k in dtypes if s.peaks.get(k)]
    xs += [p / s.bandwidth for s in roofs for k in dtypes if (p := s.peaks.get(k))]
    x_lo = min([0.05, *[x / 4 for x in xs if x > 0]])
    x_hi = max([2000.0, *[x * 4 for x in xs]])
    ys += [x_lo * s.bandwidth for s in roofs] + peaks
    y_lo = min(y for y in ys if y > 0) / 3 if any(y > 0 for y in ys) else 1e9
    y_hi = max(ys) * 4 if ys else 1e15
    return (x_lo, x_hi), (y_lo, y_hi)


def _axes(fig: Any, x_range: tuple, y_range: tuple, unit_peak: float) -> None:
    scale, unit = _y_unit(unit_peak)
    xv, xt = _decade_ticks(*x_range)
    yv, yt = _decade_ticks(*y_range, scale=scale)
    fig.update_layout(
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}, "tickvals": xv, "ticktext": xt,
               "range": [math.log10(x_range[0]), math.log10(x_range[1])], "gridcolor": "#eee"},
        yaxis={"type": "log", "title": {"text": f"performance ({unit})"}, "tickvals": yv, "ticktext": yt,
               "range": [math.log10(y_range[0]), math.log10(y_range[1])], "gridcolor": "#eee"},
        meta={"roofline_unit": unit, "roofline_scale": scale})


def empty_text(roofs: list[Roofs]) -> str:
    kind = next((r.kind for r in roofs if r.kind), None)
    if kind == "gpu":
        return "no GPU results yet: run a kernel on a GPU"
    if kind == "cpu":
        return "no CPU wall-clock results yet (Triton-interpreter times are not hardware: they are listed instead)"
    return "no timed results yet"


def roofline_figure(points: Any = (), spec: Any = None, ceilings: Any = None,
                    dtypes: tuple[str, ...] = ("fp32", "fp16"), as_widget: bool = False, title: str | None = None,
                    projections: Any = (), figure: Any = None, kernels: Any = ()):
    """A roofline go.Figure (go.FigureWidget with `as_widget=True`; refilled in place when `figure` is given).

    points: Results, store rows or a store DataFrame (`Store.frame()`); only those timed on the roofs' hardware
    are drawn (`split_points` says why the others are not). spec: a DeviceSpec (datasheet roofs, dashed; a
    measured spec is drawn solid) or Ceilings; ceilings: measured Ceilings (solid); dtypes: which compute
    roofs to draw (keys fp64, fp32, tf32, fp16, bf16, fp8, int8). projections: `roofline.projection.Projection`s
    drawn as hollow diamonds with their bound and floor in the legend (counted work, not measured). kernels:
    Projections of named kernels' work, drawn as filled stars in their task's colour (`projection_figure`).
    """
    go = _go()
    roofs = [Roofs(s) for s in (spec, ceilings) if s is not None]
    rows, _ = split_points(points, roofs)
    projected, marked = tuple(projections or ()), tuple(kernels or ())
    x_range, y_range = _ranges(rows, roofs, dtypes, projected + marked)
    if figure is not None:
        fig = figure
        fig.data = ()
        fig.layout = {}
    else:
        fig = go.FigureWidget() if as_widget else go.Figure()
    if as_widget or figure is not None:
        fig._config = dict(PLOT_CONFIG)
    labels: list[dict] = []
    lowest = min([s.bandwidth for s in roofs] or [1.0])
    for slot, source in enumerate(roofs):
        for trace in roof_traces(go, source, dtypes, x_range, textposition="bottom right" if slot else "top right"):
            fig.add_trace(trace)
        labels += _roof_labels(source, dtypes, x_range, slot, lowest)
    fig.add_trace(point_trace(go, rows))
    colors = {}
    for i, p in enumerate(projected):
        colors.setdefault(p.task, _PROJECTION_COLORS[i % len(_PROJECTION_COLORS)])
        fig.add_trace(projection_trace(go, p, _PROJECTION_COLORS[i % len(_PROJECTION_COLORS)]))
    for i, p in enumerate(marked):
        fig.add_trace(kernel_trace(go, p, colors.get(p.task) or _PROJECTION_COLORS[(len(projected) + i)
                                                                                    % len(_PROJECTION_COLORS)]))
    if not rows and not projected and not marked:  # the upper left is empty on every roofline: the slope rises to the right
        labels.append({"x": 0.03, "y": 0.9, "xref": "paper", "yref": "paper", "showarrow": False, "xanchor": "left",
                       "text": empty_text(roofs), "font": {"size": 14, "color": "#666"}, "name": "empty"})
    names = " vs ".join(f"{s.name} ({s.origin})" for s in roofs)
    peak = max([s.peaks[k] for s in roofs for k in dtypes if s.peaks.get(k)] or [y_range[1] / 4])
    _axes(fig, x_range, y_range, peak)
    fig.update_layout(
        title={"text": title or (f"Roofline: {names}" if names else "Roofline"), "x": 0.01, "xanchor": "left"},
        annotations=labels, legend={"orientation": "h", "y": -0.18, "yanchor": "top"}, hovermode="closest",
        template="plotly_white", margin={"l": 70, "r": 20, "t": 64, "b": 50},
        height=480 + 38 * len(projected + marked), showlegend=bool(projected) or bool(marked) or bool(rows))
    return fig


#: One colour per projected task (the measured points stay black, flagged ones red).
_PROJECTION_COLORS = ["#0f766e", "#7c3aed", "#b45309", "#be185d", "#1d4ed8", "#4d7c0f", "#9f1239", "#0369a1",
                      "#a16207", "#6d28d9", "#15803d", "#c2410c"]


def projection_trace(go: Any, p: Any, color: str):
    """One projected task: a hollow diamond at (intensity, attainable); the legend says what it implies."""
    names = ", ".join(p.candidates[:6]) + (f" and {len(p.candidates) - 6} more" if len(p.candidates) > 6 else "")
    hover = (f"<b>{p.label()}</b> (projection, not measured)<br>{p.intensity:.3g} FLOP/B: {p.bound}-bound on "
             f"{p.gpu}<br>at best {fmt_rate(p.attainable_flops_per_s, 'FLOP/s')}, floor "
             f"{_fmt_s(p.floor_s)}<br>{fmt_rate(p.flops, 'FLOP')}, {fmt_rate(p.bytes, 'B')} moved"
             + (f"<br>ran: {names}" if names else ""))
    # Two short legend lines rather than one long one: a narrow notebook column would clip a single line.
    name = f"{p.label()}<br><span style='color:#555'>{p.verdict()}</span>"
    return go.Scatter(x=[p.intensity], y=[p.attainable_flops_per_s], mode="markers", name=name,
                      legendgroup="projection", meta={"projection": True, "bound": p.bound, "floor_s": p.floor_s},
                      marker={"symbol": "diamond-open", "size": 13, "color": color, "line": {"width": 2.5}},
                      text=[hover], hovertemplate="%{text}<extra></extra>")


def kernel_trace(go: Any, p: Any, color: str):
    """Named kernels (`p.candidates`) that ran a task's work at one size: a filled star where that work sits on the
    GPU's roofline. The projection of what they computed, never of a time they took."""
    names = ", ".join(p.candidates[:3]) + (f" and {len(p.candidates) - 3} more" if len(p.candidates) > 3 else "")
    inside = ", ".join(part for part in (p.size_text, p.dtype) if part)
    label = f"{names} ({inside})" if inside else names
    hover = (f"<b>{label}</b><br>its counted work projected on {p.gpu}, not a measured time<br>{p.intensity:.3g} "
             f"FLOP/B: {p.bound}-bound, at best {fmt_rate(p.attainable_flops_per_s, 'FLOP/s')}, floor "
             f"{_fmt_s(p.floor_s)}<br>{fmt_rate(p.flops, 'FLOP')}, {fmt_rate(p.bytes, 'B')} moved")
    return go.Scatter(x=[p.intensity], y=[p.attainable_flops_per_s], mode="markers",
                      name=f"{label}<br><span style='color:#555'>{p.verdict()}</span>", legendgroup="kernels",
                      meta={"projection": True, "kernel": True, "bound": p.bound, "floor_s": p.floor_s},
                      marker={"symbol": "star", "size": 15, "color": color, "line": {"width": 1, "color": "white"}},
                      text=[hover], hovertemplate="%{text}<extra></extra>")


def _fmt_s(seconds: float) -> str:
    from roofline.projection import fmt_seconds

    return fmt_seconds(seconds)


def projection_figure(rows: Any, gpu: Any = None, *, kernels: Any = (), as_widget: bool = False, figure: Any = None,
                      title: str | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """(the datasheet roofline of `gpu` with every task of `rows` placed at its counted intensity, the rows
    left out with why). For machines without that GPU: nothing here is a measured time.

    kernels: Results (or store rows) of kernels to show by name, e.g. ones just timed by the Triton interpreter:
    each is a filled star at the counted work of the size it ran, labelled with the candidate's name."""
    from roofline.projection import project, resolve_gpu
    from roofline.specs import dtype_key

    spec = resolve_gpu(gpu)
    projected, left = project(rows, spec)
    marked, left_kernels = project(kernels, spec)
    dtypes = tuple(dict.fromkeys(["fp32", "fp16", *[dtype_key(p.dtype) for p in projected + marked if p.dtype]]))
    head = title or f"Projection on {spec.name} (datasheet)"
    sub = "projection: counted work, not measured times"
    fig = roofline_figure([], spec=spec, dtypes=dtypes, as_widget=as_widget, figure=figure, projections=projected,
                          kernels=marked, title=f"{head}<br><span style='font-size:12px;color:#555'>{sub}</span>")
    left = left + left_kernels
    fig.update_layout(margin={"t": 78}, meta={**(fig.layout.meta or {}), "projection_gpu": spec.name})
    return fig, left


def add_points(fig: Any, points: Any, name: str = POINTS) -> Any:
    """Append results to the figure's point trace `name` (created when missing). For a FigureWidget call it
    inside `fig.batch_update()` so a batch redraws once. The caller chooses which results belong on these
    roofs (`split_points`); rows without a hardware time or counted work are skipped here."""
    rows = point_rows(points)
    if not rows:
        return fig
    new = point_trace(_go(), rows, name)
    fig.layout.annotations = [a for a in fig.layout.annotations if a.name != "empty"]
    _widen(fig, rows)
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


def _widen(fig: Any, rows: list[dict[str, Any]]) -> None:
    """Grow fixed axis ranges (and their decade ticks) so new points stay inside the plot."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    for axis, key in ((fig.layout.xaxis, "intensity"), (fig.layout.yaxis, "flops_per_s")):
        if axis.range is None:
            continue
        lo, hi = 10 ** axis.range[0], 10 ** axis.range[1]
        values = [r[key] for r in rows if r[key] > 0]
        new_lo, new_hi = min([lo, *[v / 3 for v in values]]), max([hi, *[v * 3 for v in values]])
        if (new_lo, new_hi) != (lo, hi):
            scale = meta.get("roofline_scale", 1.0) if axis is fig.layout.yaxis else 1.0
            vals, text = _decade_ticks(new_lo, new_hi, scale)
            axis.update(range=[math.log10(new_lo), math.log10(new_hi)], tickvals=vals, ticktext=text)
