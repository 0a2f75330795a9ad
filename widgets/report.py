"""The HTML report of a study run (or a `kwb demo` run): opens offline, small enough to share.

plotly.js (~4.8 MB) is written once beside the reports (`plotly_library`) and every report loads that copy, so a
report is its numbers and figures only; `self_contained=True` inlines it for a single file. What a reader needs
first comes first: how many points and results and with which verdicts, the best result for each task *and
size*, time against what the study swept with 95% CIs (report_params), the roofline (measured on a GPU, else
each task's counted work projected on a datasheet GPU), what failed and why, flags per candidate, every result,
and where the numbers came from. Numbers come from report_data (text, units, never NaN), figures from
report_params and report_figures, provenance from report_provenance; this module only assembles the page.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from widgets import report_data as data
from widgets.report_figures import roofline_sections
from widgets.report_params import glance_figure, task_figures
from widgets.report_provenance import provenance
from workbench.errors import require

esc = html.escape

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;padding:1.5em;max-width:1400px;
 box-sizing:border-box;color:#111827;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #e5e7eb}
.kwb-scroll{overflow-x:auto;max-width:100%;margin:.5em 0;border:1px solid #e5e7eb;border-radius:4px}
.kwb-table{border-collapse:collapse;font-size:13px;width:max-content;min-width:100%}
.kwb-table th{background:#f9fafb;text-align:left;position:sticky;top:0}
.kwb-table td,.kwb-table th{padding:4px 10px;border-bottom:1px solid #eee;white-space:nowrap;vertical-align:top}
.kwb-table td.kwb-wrap{white-space:normal;min-width:16em;max-width:48em;overflow-wrap:anywhere}
.kwb-chip{display:inline-block;border-radius:10px;padding:1px 9px;margin:0 4px 4px 0;font-size:13px;
 background:#f3f4f6}.kwb-chip.ok{background:#dcfce7;color:#166534}.kwb-chip.bad{background:#fee2e2;color:#991b1b}
.kwb-note{color:#4b5563;font-size:14px}.kwb-warn{background:#fef3c7;border-left:4px solid #d97706;padding:6px 10px}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f9fafb;padding:6px;margin:0;font-size:12px}
.kwb-figure{max-width:100%;overflow-x:auto}
"""

#: Columns of the table of every result.
ALL_COLUMNS = ["task", "candidate_name", "size", "dtype", "device", "status", "flags", "time", "clock", "ref",
               "speedup", "speedup_verdict", "speedup_basis", "sol", "bound", "coverage", "max_abs_err",
               "max_rel_err", "precision", "kernel_policy", "sandbox", "message"]
#: Clocks from the most to the least comparable with hardware speed (figures follow this order).
_CLOCK_ORDER = ["cuda-events", "wall", "interpreter"]
BEST_COLUMNS = ["task", "size", "dtype", "device", "candidate_name", "time", "clock", "speedup", "speedup_verdict",
                "sol", "bound", "coverage", "sandbox"]


def _table(headers: list[str], rows: list[list[str]], wrap: tuple[str, ...] = ("message", "error", "parameters"),
           raw: set[int] = frozenset()) -> str:
    """A table inside a horizontally scrolling box, so a wide table never runs off the page."""
    if not rows:
        return "<p class='kwb-note'><em>none</em></p>"
    wrap_idx = {i for i, h in enumerate(headers) if h in wrap}
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            cls = " class='kwb-wrap'" if i in wrap_idx else ""
            cells.append(f"<td{cls}>{value if i in raw else esc(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<div class='kwb-scroll'><table class='kwb-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _figure(fig) -> str:
    return ("<div class='kwb-figure'>" + fig.to_html(full_html=False, include_plotlyjs=False,
                                                      config={"responsive": True, "displaylogo": False}) + "</div>")


def _load(store_path: str, run_id: str):
    from workbench.store import Store
    from workbench.study.journal import Journal

    store = Store(store_path)
    try:
        frame = store.frame(run_id=run_id, source=False)
        # Full results only where the frame lacks a field the report shows (GPU telemetry), and a bounded number.
        ids = [int(i) for i in frame.loc[frame["clock"] == "cuda-events", "id"]][:50] if len(frame) else []
        results = [store.get(i) for i in ids]
        known_runs = list(store.runs()["run_id"].dropna())
    finally:
        store.close()
    journal = Journal(store_path)
    points = journal.points(run_id)
    run = next((r for r in journal.runs() if r["run_id"] == run_id), None)
    if not points and len(frame) == 0:
        from workbench.study.params import StudyInputError

        runs = sorted(set(known_runs) | {r["run_id"] for r in journal.runs()})
        raise StudyInputError(f"run {run_id!r} has no points or results in {store_path}; runs there: "
                              f"{', '.join(runs) or '(none)'}")
    return frame, points, run, results


def _summary(frame, points: list[dict[str, Any]]) -> str:
    counts = data.status_counts(frame)
    chips = "".join(f"<span class='kwb-chip {'ok' if s == 'ok' else 'bad'}'>{n} {esc(s)}</span>"
                    for s, n in counts.items())
    done = sum(p["status"] == "done" for p in points)
    failed = sum(p["status"] == "failed" for p in points)
    parts = []
    if points:
        parts.append(f"{len(points)} point{'s' * (len(points) != 1)}: {done} done"
                     + (f", <b>{failed} failed</b>" if failed else ""))
    parts.append(f"{len(frame)} result{'s' * (len(frame) != 1)}")
    return f"<p>{' · '.join(parts)}</p><div>{chips}</div>"


def _warnings(frame) -> str:
    rows = data.records(frame)
    out = []
    unsandboxed = [r for r in rows if r.get("sandbox") == "none"]
    if unsandboxed:
        out.append(f"{len(unsandboxed)} result(s) ran without a sandbox (sandbox: none): the candidates could reach "
                   "this machine's files and network while they ran.")
    clocks = {r.get("clock") for r in rows} - {None}
    if clocks == {"interpreter"}:
        out.append("Every time here comes from the Triton interpreter on a CPU: it shows correctness and relative "
                   "cost, not GPU speed, so no speedup is given and the roofline is a projection of counted work, "
                   "not a measurement.")
    return "".join(f"<p class='kwb-warn'>{esc(w)}</p>" for w in out)


def _failures(frame, points: list[dict[str, Any]]) -> str:
    parts = []
    failed_points = [p for p in points if p["status"] == "failed"]
    if failed_points:
        rows = []
        for p in failed_points:
            error = p.get("error") or ""
            if p.get("output") and not error.strip():
                from workbench.study.failures import from_notebook

                error = from_notebook(p["output"]) or ""
            rows.append([esc(p["point_id"]), esc(_params_text(p.get("parameters"))),
                         f"<pre>{esc(error.strip() or 'no message recorded')}</pre>", esc(str(p.get("output") or ""))])
        parts.append("<h3>Points that failed</h3>")
        parts.append(_table(["point", "parameters", "error", "executed notebook"], rows, raw={0, 1, 2, 3},
                            wrap=("parameters", "error")))
    bad = data.failed_results(frame)
    if bad:
        rows = []
        for r in bad:
            message = data.text(r.get("message")).strip() or "no message"
            first = data.first_line(message)
            detail = (f"<details><summary>{esc(first)}</summary><pre>{esc(message[:6000])}</pre></details>"
                      if message != first else esc(first))
            rows.append([esc(data.text(r.get("task"))), esc(data.text(r.get("candidate_name"))),
                         esc(data.size_label(r.get("size"))), esc(data.text(r.get("status"))),
                         esc(data.flags_text(r.get("flags")) or "-"), detail])
        parts.append("<h3>Results that did not pass</h3>")
        parts.append(_table(["task", "candidate", "size", "status", "flags", "message"], rows,
                            raw=set(range(6))))
    return "".join(parts) or "<p class='kwb-note'>Nothing failed.</p>"


def _params_text(raw: Any) -> str:
    try:
        params = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except json.JSONDecodeError:
        return str(raw)
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in params.items()) or "(defaults)"


def _figures(records: list[dict[str, Any]]) -> list[str]:
    """Per task and clock, figures against what the study swept (report_params); the tasks that swept nothing
    share one bar chart per clock. Interpreter, CPU wall-clock and GPU times never share an axis."""
    parts: list[str] = []
    glance: dict[str, list[dict[str, Any]]] = {}
    for task in sorted({data.text(r.get("task")) for r in records}):
        task_rows = [r for r in records if data.text(r.get("task")) == task]
        clocks = sorted({data.text(r.get("clock")) for r in task_rows if r.get("status") == "ok"} - {""},
                        key=lambda c: (_CLOCK_ORDER.index(c) if c in _CLOCK_ORDER else 9, c))
        for clock in clocks:
            # Failed configs keep their heatmap cells: rows of this clock, and failures that were never timed.
            rows = [r for r in task_rows if data.text(r.get("clock")) in (clock, "")]
            figures = task_figures(task, rows)
            if figures:
                parts.extend(_figure(fig) for fig in figures)
            else:
                glance.setdefault(clock, []).extend(rows)
    for clock, rows in glance.items():
        fig = glance_figure(rows, clock)
        if fig is not None:
            parts.append(_figure(fig))
    return parts


def render_report(store_path: str, run_id: str, plotly_src: str | None = None,
                  projection_gpu: str | None = None) -> str:
    """The report's HTML text for `run_id` in the store at `store_path`.

    plotly_src: where the page loads plotly.js from (a path relative to the report, as `write_report` writes
    it beside the report); None inlines the library (one ~4.8 MB file that opens anywhere). projection_gpu:
    the datasheet GPU that CPU and interpreter runs are projected on (default H100 SXM)."""
    frame, points, run, results = _load(store_path, run_id)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>Study report {esc(run_id)}</title><style>{_CSS}</style>",
        _plotly_script(plotly_src),
        "</head><body>",
        _MISSING_PLOTLY if plotly_src else "",
        f"<h1>Study report: {esc(run_id)}</h1>",
    ]
    if run:
        parts.append(f"<p class='kwb-note'>{esc(Path(data.text(run.get('notebook'))).name)}</p>")
    parts.append(_summary(frame, points))
    parts.append(_warnings(frame))

    parts.append("<h2>Best per task and size</h2>")
    parts.append("<p class='kwb-note'>The fastest passing result among results of the same task, size, dtype, "
                 "device and clock.</p>")
    headers, rows = data.table_rows(data.best_per_task_size(frame), BEST_COLUMNS)
    parts.append(_table(headers, rows))

    records = data.records(frame)
    parts.extend(_figures(records))
    for title, fig, note in roofline_sections(frame, projection_gpu):
        parts.append(f"<h2>{esc(title)}</h2><p class='kwb-note'>{esc(note)}</p>")
        if fig is not None:
            parts.append(_figure(fig))

    parts.append("<h2>Failures</h2>")
    parts.append(_failures(frame, points))
    parts.append("<h2>Flags per candidate</h2>")
    parts.append(_table(*data.flag_counts(frame)))
    parts.append("<h2>All results</h2>")
    headers, rows = data.table_rows(records, ALL_COLUMNS)
    headers, rows, common = data.split_common(headers, rows)
    if common:
        parts.append("<p class='kwb-note'>Every result: " + " · ".join(f"{esc(h)} <b>{esc(v)}</b>" for h, v in common)
                     + "</p>")
    parts.append(_table(headers, rows))
    if points:
        parts.append("<h2>Points</h2>")
        parts.append(_table(["point", "status", "seconds", "parameters", "executed notebook"],
                            [[p["point_id"], p["status"], f"{(p['seconds'] or 0):.1f}", _params_text(p["parameters"]),
                              data.text(p.get("output"))] for p in points]))
    parts.append("<h2>Provenance</h2>")
    parts.append(_table(["", ""], [[k, v] for k, v in provenance(frame, run, results, store_path)],
                        wrap=("",)))
    parts.append("</body></html>")
    return "\n".join(parts)


#: Shown only when the page cannot find plotly.js (the report was copied without the file beside it).
_MISSING_PLOTLY = ("<p id='kwb-no-plotly' class='kwb-warn' style='display:none'>The figures need plotly.js: keep "
                   "the plotly-*.min.js file that was written beside this report next to it.</p>"
                   "<script>window.addEventListener('load',function(){if(!window.Plotly){"
                   "document.getElementById('kwb-no-plotly').style.display='block';}});</script>")


def _plotly_script(src: str | None) -> str:
    if src:
        return f"<script type='text/javascript' src='{esc(src)}'></script>"
    plotly = require("plotly", "lab", "study reports")
    return f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"


def plotly_library(folder: str | Path) -> Path:
    """plotly.js in `folder`, written once (versioned name): every report beside it loads this one copy."""
    plotly = require("plotly", "lab", "study reports")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"plotly-{plotly.__version__}.min.js"
    text = plotly.offline.get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(text.encode()):
        path.write_text(text)
    return path


def write_report(store_path: str, run_id: str, output: str | Path, library_dir: str | Path | None = None,
                 projection_gpu: str | None = None, self_contained: bool = False) -> str:
    """Write the report to `output`, with plotly.js shared in `library_dir` (default: beside the report);
    `self_contained` inlines it instead. Returns the report's path."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    src = None
    if not self_contained:
        library = plotly_library(library_dir if library_dir is not None else output.parent)
        src = Path(os.path.relpath(library.resolve(), output.parent.resolve())).as_posix()
    output.write_text(render_report(store_path, run_id, plotly_src=src, projection_gpu=projection_gpu))
    return str(output)
