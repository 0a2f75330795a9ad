"""The audit's two figures: the distribution of claimed and measured speedups, and claim against measurement with
the y = x line (a point below it measured less than it claimed).

Each is drawn twice from the same numbers: as a plotly figure for notebooks (`claims_histogram`,
`claims_scatter`), and as inline SVG for the HTML report, which then needs no script and stays far below 1 MB
(plotly.js alone is about 4.8 MB).
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLOURS", "claims_histogram", "claims_scatter", "histogram_svg", "scatter_svg"]

#: Colour of each `survives` value.
COLOURS = {"yes": "#15803d", "no": "#b91c1c", "n/a": "#6b7280"}
_CLAIMED, _MEASURED = "#2563eb", "#ea580c"


def _points(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows with both a claimed and a measured speedup."""
    keep = frame["claimed_speedup"].notna() & frame["speedup"].notna()
    return frame[keep].to_dict("records")


def _bins(values: list[float]) -> list[float]:
    """Edges in powers of two around the values (a speedup's natural scale)."""
    low = math.floor(math.log2(min(values))) if values else -1
    high = math.ceil(math.log2(max(values))) if values else 2
    high = max(high, low + 1)
    return [2.0 ** (k / 2) for k in range(2 * low, 2 * high + 1)]


def _counts(values: list[float], edges: list[float]) -> list[int]:
    return [sum(lo <= v < hi or (i == len(edges) - 2 and v == hi) for v in values)
            for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False))]


def claims_histogram(frame: pd.DataFrame) -> Any:
    """Claimed and measured speedups, counted in half-octave bins (plotly)."""
    import plotly.graph_objects as go

    claimed, measured = frame["claimed_speedup"].dropna().tolist(), frame["speedup"].dropna().tolist()
    edges = _bins(claimed + measured)
    labels = [f"{lo:.2g}-{hi:.2g}x" for lo, hi in zip(edges, edges[1:], strict=False)]
    fig = go.Figure([go.Bar(x=labels, y=_counts(claimed, edges), name="claimed", marker_color=_CLAIMED),
                     go.Bar(x=labels, y=_counts(measured, edges), name="measured", marker_color=_MEASURED)])
    fig.update_layout(barmode="group", title="Claimed and measured speedups", xaxis_title="speedup over PyTorch",
                      yaxis_title="kernels", template="plotly_white", height=360)
    return fig


def claims_scatter(frame: pd.DataFrame) -> Any:
    """Measured (with its 95% CI) against claimed, log-log, coloured by whether the claim survives (plotly)."""
    import plotly.graph_objects as go

    rows = _points(frame)
    fig = go.Figure()
    for survives, colour in COLOURS.items():
        mine = [r for r in rows if r["survives"] == survives]
        if not mine:
            continue
        fig.add_trace(go.Scatter(
            x=[r["claimed_speedup"] for r in mine], y=[r["speedup"] for r in mine], mode="markers",
            name=f"survives: {survives}", marker={"color": colour, "size": 9},
            error_y={"type": "data", "symmetric": False,
                     "array": [(r["speedup_ci_high"] - r["speedup"]) if r["speedup_ci_high"] == r["speedup_ci_high"]
                               else 0 for r in mine],
                     "arrayminus": [(r["speedup"] - r["speedup_ci_low"]) if r["speedup_ci_low"] == r["speedup_ci_low"]
                                    else 0 for r in mine]},
            text=[f"{r['kernel']}<br>{r['why']}" for r in mine], hoverinfo="text"))
    values = [v for r in rows for v in (r["claimed_speedup"], r["speedup"])] or [0.5, 2.0]
    lo, hi = min(values) / 1.3, max(values) * 1.3
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="measured = claimed",
                             line={"color": "#111827", "dash": "dash"}))
    fig.update_layout(title="Measured against claimed speedup", xaxis={"type": "log", "title": "claimed"},
                      yaxis={"type": "log", "title": "measured (95% CI)"}, template="plotly_white", height=420)
    return fig


# ---- SVG for the report ----------------------------------------------------------------------------------------

_W, _H, _PAD = 560, 300, 48


def _frame_svg(body: str, x_title: str, y_title: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{_H}' viewBox='0 0 {_W} {_H}' "
            "font-family='sans-serif' font-size='11'>"
            f"<line x1='{_PAD}' y1='{_H - _PAD}' x2='{_W - 10}' y2='{_H - _PAD}' stroke='#111827'/>"
            f"<line x1='{_PAD}' y1='10' x2='{_PAD}' y2='{_H - _PAD}' stroke='#111827'/>"
            f"<text x='{(_W + _PAD) / 2}' y='{_H - 8}' text-anchor='middle'>{escape(x_title)}</text>"
            f"<text x='12' y='{(_H - _PAD) / 2}' text-anchor='middle' transform='rotate(-90 12 {(_H - _PAD) / 2})'>"
            f"{escape(y_title)}</text>{body}</svg>")


def histogram_svg(frame: pd.DataFrame) -> str:
    """`claims_histogram` as SVG."""
    claimed, measured = frame["claimed_speedup"].dropna().tolist(), frame["speedup"].dropna().tolist()
    edges = _bins(claimed + measured)
    series = [(_counts(claimed, edges), _CLAIMED, "claimed"), (_counts(measured, edges), _MEASURED, "measured")]
    top = max([1, *series[0][0], *series[1][0]])
    slot = (_W - _PAD - 20) / (len(edges) - 1)
    parts = []
    for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False)):
        x0 = _PAD + 4 + i * slot
        for j, (counts, colour, name) in enumerate(series):
            h = (_H - _PAD - 20) * counts[i] / top
            parts.append(f"<rect x='{x0 + j * slot * 0.45:.1f}' y='{_H - _PAD - h:.1f}' width='{slot * 0.42:.1f}' "
                         f"height='{h:.1f}' fill='{colour}'><title>{name} {lo:.2g}-{hi:.2g}x: {counts[i]}</title>"
                         "</rect>")
        parts.append(f"<text x='{x0 + slot * 0.45:.1f}' y='{_H - _PAD + 14}' text-anchor='middle'>{lo:.2g}</text>")
    parts.append(f"<text x='{_PAD + 4}' y='20' fill='{_CLAIMED}'>■ claimed</text>"
                 f"<text x='{_PAD + 84}' y='20' fill='{_MEASURED}'>■ measured</text>"
                 f"<text x='{_PAD - 6}' y='24' text-anchor='end'>{top}</text>")
    return _frame_svg("".join(parts), "speedup over PyTorch (bins from)", "kernels")


def scatter_svg(frame: pd.DataFrame) -> str:
    """`claims_scatter` as SVG (log-log, the y = x line dashed, CIs as whiskers, each point's verdict on hover)."""
    rows = _points(frame)
    values = [v for r in rows for v in (r["claimed_speedup"], r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"])
              if v == v and v is not None and v > 0] or [0.5, 2.0]
    lo, hi = math.log2(min(values) / 1.3), math.log2(max(values) * 1.3)

    def x(v: float) -> float:
        return _PAD + (_W - _PAD - 20) * (math.log2(v) - lo) / (hi - lo)

    def y(v: float) -> float:
        return _H - _PAD - (_H - _PAD - 20) * (math.log2(v) - lo) / (hi - lo)

    ends = (2 ** lo, 2 ** hi)
    parts = [f"<line x1='{x(ends[0]):.1f}' y1='{y(ends[0]):.1f}' x2='{x(ends[1]):.1f}' y2='{y(ends[1]):.1f}' "
             "stroke='#111827' stroke-dasharray='5 4'/>"]
    for k in range(math.ceil(lo), math.floor(hi) + 1):
        parts.append(f"<text x='{x(2 ** k):.1f}' y='{_H - _PAD + 14}' text-anchor='middle'>{2 ** k:g}</text>"
                     f"<text x='{_PAD - 4}' y='{y(2 ** k) + 4:.1f}' text-anchor='end'>{2 ** k:g}</text>")
    for r in rows:
        colour = COLOURS.get(r["survives"], "#6b7280")
        cx, cy = x(r["claimed_speedup"]), y(r["speedup"])
        low, high = r["speedup_ci_low"], r["speedup_ci_high"]
        if low == low and high == high and low and high:
            parts.append(f"<line x1='{cx:.1f}' y1='{y(low):.1f}' x2='{cx:.1f}' y2='{y(high):.1f}' stroke='{colour}'/>")
        parts.append(f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='5' fill='{colour}'><title>{escape(str(r['kernel']))}: "
                     f"{escape(str(r['why']))}</title></circle>")
    if not rows:
        parts.append(f"<text x='{_W / 2}' y='{_H / 2}' text-anchor='middle'>no kernel has both a claimed and a "
                     "measured speedup</text>")
    return _frame_svg("".join(parts), "claimed speedup", "measured speedup (95% CI)")
