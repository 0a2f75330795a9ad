"""A study report's figures against what the study varied: the sweep's knobs, the grid's parameters, the size.

A block-size study varies BLOCK and NUM_WARPS at one size; plotting its times by size stacks every config in one
category. So each result's parameters are read back (the sweep config the candidate carries, the point's grid
parameters, its size), the ones that take more than one value are the swept ones, and the figure follows them:

- one swept parameter: median time against it, one line (with its 95% CI band) per candidate;
- two or more: x is the numeric one with the most values, one line per value of the others; with exactly two a
  heatmap too, each cell the median time (a failed config keeps its cell, labelled with its status);
- nothing swept: the task joins one "times at a glance" bar chart (the demo: one solution per task).

Times of different clocks never share a figure; speedups (GPU runs) get the same lines with the y = 1 reference.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from widgets._plot import log_ticks
from widgets.report_data import missing, size_label, size_order, text
from widgets.report_figures import PALETTE, _line_with_band, _num, _times
from workbench.errors import require

#: Point parameters that say what ran, not what varied (the size is read from the result itself).
_NOT_SWEPT = {"size", "template", "task_name", "notebook_dir"}
_CONFIG_SUFFIX = re.compile(r"\[[^\]]*\]$")


def _go():
    return require("plotly.graph_objects", "lab", "study reports", package="plotly")


def _value(value: Any) -> Any:
    """Numbers, strings and booleans as they are; lists and dicts as compact JSON (hashable, readable)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            meta = {}
    return meta if isinstance(meta, dict) else {}


def row_parameters(row: dict[str, Any]) -> dict[str, Any]:
    """The sweep knobs of the result's candidate, then its point's grid parameters, then its size."""
    meta = _metadata(row)
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    point = meta.get("parameters") if isinstance(meta.get("parameters"), dict) else {}
    params = {k: _value(v) for k, v in config.items()}
    params.update({k: _value(v) for k, v in point.items() if k not in _NOT_SWEPT and k not in params})
    params["size"] = size_label(row.get("size"))
    name = text(row.get("candidate_name"), "?")
    params["candidate"] = _CONFIG_SUFFIX.sub("", name) if config else name
    return params


def swept(rows: list[dict[str, Any]]) -> list[str]:
    """Parameters with more than one value across `rows`, knobs first, the candidate last."""
    params = [row_parameters(r) for r in rows]
    keys = list(dict.fromkeys(k for p in params for k in p))
    keys = [k for k in keys if k != "candidate"] + ["candidate"]
    return [k for k in keys if len({p.get(k) for p in params}) > 1]


def _numeric(rows: list[dict[str, Any]], key: str) -> bool:
    values = [row_parameters(r).get(key) for r in rows]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _x_axis(rows: list[dict[str, Any]], dims: list[str]) -> str:
    numeric = [k for k in dims if k not in ("size", "candidate") and _numeric(rows, k)]
    if numeric:
        return max(numeric, key=lambda k: (len({row_parameters(r)[k] for r in rows}), -dims.index(k)))
    return "size" if "size" in dims else dims[0]


def _order(rows: list[dict[str, Any]], key: str) -> list[Any]:
    if key == "size":
        sizes = {size_label(r.get("size")): size_order(r.get("size")) for r in rows}
        return sorted(sizes, key=lambda label: sizes[label])
    values = list(dict.fromkeys(row_parameters(r)[key] for r in rows))
    return sorted(values) if all(isinstance(v, (int, float)) for v in values) else values


def _axis(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = _order(rows, key)
    if _numeric(rows, key) and key != "size":
        spread = max(values) / min(values) if min(values) > 0 else 1
        return {"title": key, "type": "log" if spread >= 8 else "linear", "tickvals": values,
                "ticktext": [str(v) for v in values]}
    return {"title": key, "type": "category", "categoryorder": "array", "categoryarray": [str(v) for v in values]}


#: metric -> (row key of the value, of its CI low and high, unit, axis title)
METRICS = {"time": ("time_median_ms", "time_ci95_low_ms", "time_ci95_high_ms", "ms", "time (ms), median and 95% CI"),
           "speedup": ("speedup", "speedup_ci_low", "speedup_ci_high", "x", "speedup (x), with 95% CI")}


def lines_figure(task: str, rows: list[dict[str, Any]], dims: list[str], metric: str = "time", clock: str = ""):
    """One line per combination of the other swept parameters, against the x parameter, with CI bands."""
    go = _go()
    key, lo_key, hi_key, unit, y_title = METRICS[metric]
    x = _x_axis(rows, dims)
    others = [d for d in dims if d != x]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        p = row_parameters(r)
        name = ", ".join(f"{k}={p[k]}" if k != "candidate" else str(p[k]) for k in others) or text(p["candidate"])
        groups.setdefault(name, []).append(r)
    order = [str(v) for v in _order(rows, x)]
    numeric_x = _numeric(rows, x) and x != "size"
    fig = go.Figure()
    for i, (name, group) in enumerate(groups.items()):
        group = sorted(group, key=lambda r: order.index(str(row_parameters(r)[x])))
        xs = [row_parameters(r)[x] if numeric_x else str(row_parameters(r)[x]) for r in group]
        _line_with_band(fig, go, name, PALETTE[i % len(PALETTE)], xs, [float(r[key]) for r in group],
                        [_num(r.get(lo_key)) for r in group], [_num(r.get(hi_key)) for r in group], unit)
    what = "median time" if metric == "time" else "speedup over the eager reference"
    note = " · interpreter times: relative only, not hardware speed" if clock == "interpreter" else ""
    fig.update_layout(title=f"{task}: {what} by {x}" + (f" ({clock})" if metric == "time" and clock else "") + note,
                      xaxis=_axis(rows, x), height=440, legend={"orientation": "h", "y": -0.22, "yanchor": "top"},
                      yaxis={"title": y_title, **({"type": "log", **log_ticks(_times(rows))} if metric == "time"
                                                  else {"type": "linear"})},
                      margin={"l": 70, "r": 20, "t": 60, "b": 50}, template="plotly_white")
    if metric == "speedup":
        fig.add_hline(y=1.0, line={"dash": "dash", "color": "#6b7280"}, annotation_text="reference (eager)",
                      annotation_position="top left")
    return fig


def heatmap_figure(task: str, rows: list[dict[str, Any]], dims: list[str], clock: str = ""):
    """Median time over two swept parameters, every config in its cell (failed ones with their status)."""
    from widgets.sweep_plot import sweep_figure, sweep_frame

    x = _x_axis([r for r in rows if r.get("status") == "ok"] or rows, dims)
    y = next(d for d in dims if d != x)
    frame_rows = []
    for r in rows:
        p = row_parameters(r)
        frame_rows.append({x: p[x], y: p[y], "status": text(r.get("status")), "flags": [],
                           "time_ms": _num(r.get("time_median_ms")), "ci95_low_ms": _num(r.get("time_ci95_low_ms")),
                           "ci95_high_ms": _num(r.get("time_ci95_high_ms")), "clock": clock, "speedup": None,
                           "sol_fraction": None, "candidate": p["candidate"]})
    frame_rows.sort(key=lambda d: (_sort_key(d[x]), _sort_key(d[y])))  # the axes list values in order
    fig = sweep_figure(sweep_frame(frame_rows, [x, y]), [x, y])
    fig.update_layout(title=f"{task} ({clock}): {fig.layout.title.text}", height=380, template="plotly_white")
    return fig


def _sort_key(value: Any) -> Any:
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def task_figures(task: str, rows: list[dict[str, Any]]) -> list[Any]:
    """The figures of one task's results of one clock: [] when nothing was swept (see `glance_figure`)."""
    ok = [r for r in rows if r.get("status") == "ok" and not missing(r.get("time_median_ms"))]
    dims = swept(ok)
    if not ok or not dims:
        return []
    clock = text(ok[0].get("clock"))
    figures = [lines_figure(task, ok, dims, "time", clock)]
    if len(dims) == 2 and "candidate" not in dims:
        figures.append(heatmap_figure(task, rows, dims, clock))
    rated = [r for r in ok if not missing(r.get("speedup"))]
    if rated and swept(rated):
        figures.append(lines_figure(task, rated, swept(rated), "speedup", clock))
    return figures


def glance_figure(rows: list[dict[str, Any]], clock: str):
    """One bar per passing result (task and candidate) with its 95% CI: the tasks that swept nothing."""
    go = _go()
    ok = sorted((r for r in rows if r.get("status") == "ok" and not missing(r.get("time_median_ms"))),
                key=lambda r: (text(r.get("task")), text(r.get("candidate_name"))))
    if not ok:
        return None
    many = len({text(r.get("candidate_name")) for r in ok}) > len({text(r.get("task")) for r in ok})
    labels = [f"{text(r.get('task'))}: {text(r.get('candidate_name'))}" if many else text(r.get("task")) for r in ok]
    ys = [float(r["time_median_ms"]) for r in ok]
    hi = [(_num(r.get("time_ci95_high_ms")) or y) - y for r, y in zip(ok, ys, strict=True)]
    lo = [y - (_num(r.get("time_ci95_low_ms")) or y) for r, y in zip(ok, ys, strict=True)]
    sizes = [f"{text(r.get('candidate_name'))}<br>{size_label(r.get('size'))}" for r in ok]
    fig = go.Figure(go.Bar(x=labels, y=ys, marker_color=PALETTE[0], customdata=sizes,
                           error_y={"type": "data", "array": hi, "arrayminus": lo, "symmetric": False, "width": 4},
                           hovertemplate="%{customdata}<br>%{y:.4g} ms<extra></extra>"))
    note = " · interpreter times: relative only, not hardware speed" if clock == "interpreter" else ""
    top = max(y + h for y, h in zip(ys, hi, strict=True))
    fig.update_layout(title=f"Median time per task ({clock}){note}", height=400, template="plotly_white",
                      xaxis={"title": "", "tickangle": -30 if len(labels) > 6 else 0},
                      yaxis={"title": "time (ms), median and 95% CI", "type": "log",
                             "range": [math.log10(min(ys) / 3), math.log10(top * 3)],
                             **log_ticks([min(ys) / 3, *ys, top * 3])},
                      margin={"l": 70, "r": 20, "t": 60, "b": 90}, showlegend=False)
    return fig
