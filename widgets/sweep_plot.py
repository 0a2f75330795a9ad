"""Figures of a sweep frame (`workbench.study.sweep.run_sweep`'s rows): one knob is a line of median times
with its 95% CI band; two knobs a heatmap; more knobs a heatmap of the first two, each cell the best over
the rest. The fastest correct config is starred; a failed config keeps its place, labelled with its status,
so a hole in the grid always says why it is there.
"""

from __future__ import annotations

from typing import Any

from widgets._html import fmt_ms
from widgets._plot import new_figure, titled
from widgets._records import _num
from workbench.study.sweep import RESULT_COLUMNS, best_config

#: Fill of a failed config's cell (the status is written on it).
FAILED_COLOR = "#f6d5d1"


def sweep_frame(rows: list[dict[str, Any]], knobs: list[str]):
    import pandas as pd

    return pd.DataFrame(rows, columns=[*knobs, *RESULT_COLUMNS])


def _ok(row: Any) -> bool:
    return row["status"] == "ok" and _num(row["time_ms"]) is not None


def _label(value: Any) -> str:
    return str(value)


def _ci_text(row: Any) -> str:
    lo, hi = _num(row.get("ci95_low_ms")), _num(row.get("ci95_high_ms"))
    return f" [{fmt_ms(lo)}, {fmt_ms(hi)}] 95% CI" if lo is not None and hi is not None else ""


def heatmap_data(frame, knobs: list[str]) -> dict[str, Any]:
    """x = first knob, y = second (one row for a single knob), z = median ms (None where no config passed),
    text = the time or the failed status, best = the fastest correct config (or None). With more than two
    knobs each cell holds the fastest passing config over the others."""
    if not knobs:
        raise ValueError("a sweep needs at least one knob")
    xk, yk = knobs[0], (knobs[1] if len(knobs) > 1 else None)
    xs = list(dict.fromkeys(frame[xk].tolist()))
    ys = list(dict.fromkeys(frame[yk].tolist())) if yk else [""]
    z: list[list[float | None]] = [[None] * len(xs) for _ in ys]
    text = [["not run"] * len(xs) for _ in ys]
    hover = [[""] * len(xs) for _ in ys]
    for _, row in frame.iterrows():
        i, j = (ys.index(row[yk]) if yk else 0), xs.index(row[xk])
        if _ok(row):
            t = float(row["time_ms"])
            if z[i][j] is None or t < z[i][j]:
                z[i][j], text[i][j] = t, fmt_ms(t)
                rest = ", ".join(f"{k}={row[k]}" for k in knobs[2:])
                hover[i][j] = fmt_ms(t) + _ci_text(row) + (f" (best at {rest})" if rest else "")
        elif z[i][j] is None:
            text[i][j] = hover[i][j] = str(row["status"])
    best = best_config(frame, knobs) if len(frame) else None
    if best is not None:
        i, j = (ys.index(best[yk]) if yk else 0), xs.index(best[xk])
        text[i][j] = "★ " + text[i][j]
    return {"x": xs, "y": ys, "z": z, "text": text, "hover": hover, "x_name": xk, "y_name": yk, "best": best}


def line_data(frame, knob: str) -> dict[str, Any]:
    """One knob: passing configs as (x, median, CI low, CI high), failed ones as (x, status), and the best."""
    ok = {"x": [], "y": [], "lo": [], "hi": [], "hover": []}
    failed = {"x": [], "status": []}
    for _, row in frame.iterrows():
        if _ok(row):
            t = float(row["time_ms"])
            ok["x"].append(_label(row[knob]))
            ok["y"].append(t)
            ok["lo"].append(_num(row.get("ci95_low_ms")) or t)
            ok["hi"].append(_num(row.get("ci95_high_ms")) or t)
            ok["hover"].append(f"{knob}={row[knob]}: {fmt_ms(t)}{_ci_text(row)}")
        else:
            failed["x"].append(_label(row[knob]))
            failed["status"].append(str(row["status"]))
    order = [_label(v) for v in dict.fromkeys(frame[knob].tolist())]
    return {"ok": ok, "failed": failed, "order": order, "best": best_config(frame, [knob]) if len(frame) else None}


def _title(best: dict[str, Any] | None, clock: str | None) -> str:
    clock_note = f" ({clock} clock)" if clock else ""
    if best is None:
        return f"Sweep: median time per config{clock_note}; no config passed yet"
    knobs = ", ".join(f"{k}={v}" for k, v in best.items() if k != "time_ms")
    return f"Sweep: median time per config{clock_note}; ★ fastest correct: {knobs} ({fmt_ms(best['time_ms'])})"


def _fill_line(fig: Any, frame, knob: str, clock: str | None) -> None:
    data = line_data(frame, knob)
    ok, failed, best = data["ok"], data["failed"], data["best"]
    fig.add_scatter(x=ok["x"], y=ok["hi"], mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False,
                    name="95% CI high")
    fig.add_scatter(x=ok["x"], y=ok["lo"], mode="lines", line={"width": 0}, fill="tonexty",
                    fillcolor="rgba(31,119,180,0.18)", hoverinfo="skip", name="95% CI of the median")
    fig.add_scatter(x=ok["x"], y=ok["y"], mode="lines+markers", name="median time", text=ok["hover"],
                    hovertemplate="%{text}<extra></extra>", line={"color": "#1f77b4"}, marker={"size": 8})
    fig.add_scatter(x=failed["x"], y=[0.0] * len(failed["x"]), mode="markers+text", name="failed",
                    text=failed["status"], textposition="top center", hovertemplate="%{x}: %{text}<extra></extra>",
                    marker={"symbol": "x", "size": 11, "color": "#c62828"}, textfont={"color": "#c62828"})
    fig.add_scatter(x=[_label(best[knob])] if best else [], y=[best["time_ms"]] if best else [], mode="markers",
                    name="best", marker={"symbol": "star", "size": 20, "color": "gold",
                                         "line": {"width": 1.5, "color": "black"}}, hoverinfo="skip")
    titled(fig, _title(best, clock), height=380,
           xaxis={"title": {"text": knob}, "type": "category", "categoryorder": "array", "categoryarray": data["order"]},
           yaxis={"title": {"text": "median time (ms)"}, "rangemode": "tozero"},
           legend={"orientation": "h", "y": -0.22})


def _fill_heatmap(fig: Any, frame, knobs: list[str], clock: str | None) -> None:
    data = heatmap_data(frame, knobs)
    xs, ys = [_label(v) for v in data["x"]], [_label(v) for v in data["y"]]
    failed_z = [[1 if v is None else None for v in row] for row in data["z"]]
    failed_text = [[t if v is None else "" for t, v in zip(trow, zrow, strict=True)]
                   for trow, zrow in zip(data["text"], data["z"], strict=True)]
    fig.add_heatmap(x=xs, y=ys, z=failed_z, text=failed_text, texttemplate="%{text}", showscale=False,
                    colorscale=[[0, FAILED_COLOR], [1, FAILED_COLOR]], hovertemplate="%{text}<extra></extra>",
                    name="failed", xgap=2, ygap=2, textfont={"color": "#8e1b10"})
    time_text = [[t if v is not None else "" for t, v in zip(trow, zrow, strict=True)]
                 for trow, zrow in zip(data["text"], data["z"], strict=True)]
    fig.add_heatmap(x=xs, y=ys, z=data["z"], text=time_text, customdata=data["hover"], texttemplate="%{text}",
                    colorscale="Blues", colorbar={"title": {"text": "ms"}}, name="time", xgap=2, ygap=2, hoverongaps=False,
                    hovertemplate=f"{data['x_name']}=%{{x}}" + (f", {data['y_name']}=%{{y}}" if data["y_name"] else "")
                    + ": %{customdata}<extra></extra>")
    best = data["best"]
    if best is not None:  # a gold frame around the best cell (its text carries the star)
        j = data["x"].index(best[data["x_name"]])
        i = data["y"].index(best[data["y_name"]]) if data["y_name"] else 0
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, xref="x", yref="y",
                      line={"color": "#f2b705", "width": 4}, name="best")
    extra = f" (each cell: best over {', '.join(knobs[2:])})" if len(knobs) > 2 else ""
    titled(fig, _title(best, clock) + extra, height=380,
           xaxis={"title": {"text": data["x_name"]}, "type": "category"},
           yaxis={"title": {"text": data["y_name"] or ""}, "type": "category"})


def fill_sweep_figure(fig: Any, frame, knobs: list[str], clock: str | None = None) -> None:
    """Redraw `fig` (a Figure or a live figure) for the frame: a line for one knob, else a heatmap."""
    fig.data = []
    fig.layout.annotations = []
    fig.layout.shapes = []
    if len(knobs) == 1:
        _fill_line(fig, frame, knobs[0], clock)
    else:
        _fill_heatmap(fig, frame, knobs, clock)


def sweep_figure(frame, knobs: list[str], clock: str | None = None, widget: bool = False) -> Any:
    fig = new_figure(widget)
    fill_sweep_figure(fig, frame, knobs, clock)
    return fig
