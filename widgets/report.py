"""One self-contained HTML report of a study run: tables and plotly figures with plotly.js inlined (no CDN)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError, require


def _frame(store_path: str, run_id: str):
    from workbench.store import Store

    store = Store(store_path)
    try:
        frame = store.frame(run_id=run_id)
    finally:
        close = getattr(store, "close", None)
        if close:
            close()
    return frame


def _size_label(size: Any) -> str:
    if isinstance(size, str):
        try:
            size = json.loads(size)
        except json.JSONDecodeError:
            return size
    if isinstance(size, dict):
        return " ".join(f"{k}={v}" for k, v in size.items())
    return str(size)


def _metadata(row: Any) -> dict[str, Any]:
    meta = row.get("metadata") if hasattr(row, "get") else None
    if isinstance(meta, str):
        try:
            return json.loads(meta) or {}
        except json.JSONDecodeError:
            return {}
    return meta or {}


def figures(frame) -> list[tuple[str, Any]]:
    """(title, plotly Figure) pairs summarizing a run's results; empty frames give no figures."""
    go = require("plotly.graph_objects", "lab", "study reports", package="plotly")
    out: list[tuple[str, Any]] = []
    if frame is None or len(frame) == 0:
        return out
    frame = frame.copy()
    frame["size_label"] = frame["size"].map(_size_label)
    ok = frame[frame["status"] == "ok"]
    for task, group in ok.groupby("task"):
        fig = go.Figure()
        for name, rows in group.groupby("candidate_name"):
            rows = rows.sort_values("time_median_ms")
            fig.add_trace(go.Bar(name=str(name), x=rows["size_label"], y=rows["time_median_ms"],
                                 hovertext=[f"{name}: {t:.4g} ms" for t in rows["time_median_ms"]]))
        if "ref_median_ms" in group:
            ref = group.drop_duplicates("size_label")
            fig.add_trace(go.Scatter(name="reference (eager)", x=ref["size_label"], y=ref["ref_median_ms"],
                                     mode="markers", marker_symbol="line-ew-open", marker_size=24))
        fig.update_layout(title=f"{task}: median time per candidate (ms)", barmode="group", yaxis_title="ms")
        out.append((f"{task}: time", fig))
        if "sol_fraction" in group and group["sol_fraction"].notna().any():
            sol = go.Figure(go.Bar(x=group["candidate_name"] + " · " + group["size_label"],
                                   y=100 * group["sol_fraction"].astype(float)))
            sol.update_layout(title=f"{task}: share of speed-of-light (%)", yaxis_title="SOL %")
            out.append((f"{task}: SOL", sol))
    status = frame.groupby("status").size()
    out.append(("statuses", go.Figure(go.Bar(x=list(status.index), y=list(status.values)),
                                      layout={"title": "results by status"})))
    return out


def _table(frame, columns: list[str]) -> str:
    cols = [c for c in columns if c in frame.columns]
    if not cols or len(frame) == 0:
        return "<p><em>no rows</em></p>"
    view = frame[cols].copy()
    if "size" in view:
        view["size"] = view["size"].map(_size_label)
    if "sol_fraction" in view:
        view["sol_fraction"] = view["sol_fraction"].map(lambda v: "" if v is None or v != v else f"{100 * v:.1f}%")
    if "flags" in view:
        view["flags"] = view["flags"].map(lambda f: ", ".join(f) if isinstance(f, (list, tuple)) else (f or ""))
    return view.to_html(index=False, classes="kwb-table", border=0, float_format=lambda x: f"{x:.4g}")


def render_report(store_path: str, run_id: str) -> str:
    """The report's HTML text for `run_id` in the store at `store_path`."""
    plotly = require("plotly", "lab", "study reports")
    from workbench.study.run import Journal

    frame = _frame(store_path, run_id)
    points = Journal(store_path).points(run_id)
    if not points and len(frame) == 0:
        raise WorkbenchError(f"run {run_id!r} has no points or results in {store_path}; `kwb study status` lists runs")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Study report {html.escape(run_id)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        ".kwb-table{border-collapse:collapse;font-size:13px}.kwb-table td,.kwb-table th{padding:3px 8px;"
        "border-bottom:1px solid #ddd;text-align:left}.ok{color:#15803d}.failed{color:#b91c1c}</style>",
        f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>",
        "</head><body>",
        f"<h1>Study report: {html.escape(run_id)}</h1>",
    ]
    done = sum(p["status"] == "done" for p in points)
    parts.append(f"<p>{len(points)} points ({done} done), {len(frame)} results.</p>")
    if len(frame):
        best = frame[frame["status"] == "ok"].sort_values("time_median_ms").groupby(["task"], as_index=False).head(1)
        parts.append("<h2>Best per task</h2>")
        parts.append(_table(best, ["task", "candidate_name", "size", "device", "time_median_ms", "speedup",
                                   "sol_fraction", "bound", "clock"]))
    for title, fig in figures(frame):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    parts.append("<h2>All results</h2>")
    parts.append(_table(frame, ["task", "candidate_name", "status", "flags", "size", "device", "clock",
                                "time_median_ms", "time_ci95_low_ms", "time_ci95_high_ms", "ref_median_ms",
                                "speedup", "sol_fraction", "max_abs_err"]))
    parts.append("<h2>Points</h2><table class='kwb-table'><tr><th>point</th><th>status</th><th>seconds</th>"
                 "<th>parameters</th><th>executed notebook</th></tr>")
    for p in points:
        parts.append(
            f"<tr><td>{html.escape(p['point_id'])}</td><td class='{p['status']}'>{p['status']}</td>"
            f"<td>{(p['seconds'] or 0):.1f}</td><td>{html.escape(p['parameters'] or '')}</td>"
            f"<td>{html.escape(str(p['output'] or ''))}</td></tr>"
        )
        if p["status"] == "failed" and p["error"]:
            parts.append(f"<tr><td colspan=5><pre>{html.escape(p['error'])}</pre></td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


def write_report(store_path: str, run_id: str, output: str | Path) -> str:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_report(store_path, run_id))
    return str(output)
