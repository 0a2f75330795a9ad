"""The audit's HTML report: one self-contained page (no script, no network; well under 1 MB) with the summary, the
two figures and the whole table, to attach to an issue or send to the kernels' authors."""

from __future__ import annotations

import datetime as _dt
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.audit.plots import COLOURS, histogram_svg, scatter_svg
from workbench.audit.table import summary

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["render_report", "write_report"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#111827;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.15em;border-bottom:1px solid #e5e7eb;margin-top:1.5em}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #e5e7eb;padding:3px 6px;vertical-align:top}
th{background:#f3f4f6;text-align:left}td.num{text-align:right;white-space:nowrap}
.chip{border-radius:9px;padding:1px 8px;color:white;font-weight:600}.note{color:#4b5563;font-size:13px}
.figs{display:flex;flex-wrap:wrap;gap:24px}pre{background:#f9fafb;padding:8px}"""


def _number(value: Any, digits: str = ".2f", suffix: str = "") -> str:
    if value is None or value != value:
        return "-"
    return f"{value:{digits}}{suffix}"


def _speedup(row: dict[str, Any], suffix: str = "") -> str:
    value = row[f"speedup{suffix}"]
    if value is None or value != value:
        return "-"
    low, high = row[f"speedup{suffix}_ci_low"], row[f"speedup{suffix}_ci_high"]
    ci = f" [{low:.2f}, {high:.2f}]" if low == low and high == high and low is not None else ""
    verdict = row[f"speedup_verdict{suffix}"] or ""
    return f"{value:.2f}x{ci} {verdict}".strip()


def _cells(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(text, css class) per column shown."""
    colour = COLOURS.get(row["survives"], "#6b7280")
    ieee = "(same)" if row["claim_precision"] == "ieee" else f"{row['status_ieee'] or '-'} {_speedup(row, '_ieee')}"
    return [
        (escape(str(row["kernel"])), ""), (escape(str(row["problem"])), ""), (escape(str(row["source"] or "")), ""),
        (_number(row["claimed_speedup"], suffix="x"), "num"), (escape(row["claim_precision"]), ""),
        (escape(row["status"]) + (f" [{escape(row['flags'])}]" if row["flags"] else ""), ""),
        (_speedup(row), "num"), (escape(ieee), ""),
        (_number(row["sol_fraction"] * 100 if row["sol_fraction"] == row["sol_fraction"] else None, ".0f", "%"), "num"),
        (_number(row["coverage"] * 100 if row["coverage"] == row["coverage"] else None, ".0f", "%"), "num"),
        (f"<span class='chip' style='background:{colour}'>{escape(row['survives'])}</span>", ""),
        (escape(str(row["why"])), ""),
    ]


_HEADERS = ["kernel", "problem", "source", "claimed", "claim precision", "status", "speedup [95% CI] verdict",
            "under ieee", "SOL", "coverage", "survives", "why"]


def render_report(frame: pd.DataFrame, title: str = "Audit of published kernels") -> str:
    """The report's HTML text."""
    rows = frame.to_dict("records")
    body = "".join("<tr>" + "".join(f"<td class='{cls}'>{text}</td>" if cls else f"<td>{text}</td>"
                                    for text, cls in _cells(row)) + "</tr>" for row in rows)
    devices = sorted({str(d) for d in frame["device"].dropna()}) or ["-"]
    clocks = set(frame["clock"].dropna())
    note = ("<p class='note'>Timed on Triton's CPU interpreter: its times are not hardware times, so no speedup is "
            "compared and speed-based verdicts read n/a. Audit on a GPU for the speed half.</p>"
            if clocks == {"interpreter"} else "")
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title><style>{_STYLE}</style>"
        f"</head><body><h1>{escape(title)}</h1><p class='note'>{len(rows)} kernels, device {escape(', '.join(devices))}"
        f", written {generated} by Kernel Workbench (`kwb audit`). What each column and verdict means: docs/audit.md."
        f"</p>{note}<h2>Summary</h2><pre>{escape(summary(frame))}</pre>"
        f"<h2>Claimed against measured</h2><div class='figs'>{histogram_svg(frame)}{scatter_svg(frame)}</div>"
        "<p class='note'>Right: a point below the dashed line measured less than its claim; the whisker is the 95% "
        "CI of the measured speedup. Hover a point for its verdict.</p>"
        f"<h2>Every kernel</h2><table><tr>{''.join(f'<th>{h}</th>' for h in _HEADERS)}</tr>{body}</table>"
        "</body></html>")


def write_report(frame: pd.DataFrame, path: str | Path, title: str = "Audit of published kernels") -> Path:
    """Write the report to `path` (its folder made when missing) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(frame, title), encoding="utf-8")
    return path
