"""HTML fragments shared by the widgets and their static renderings: status badges, numbers, tables.
(The verdict card of a result is `widgets.verdict`.)

Fragments carry class names and `data-kwb-*` attributes so a browser test (or a user's CSS) can find
them without parsing text: `.kwb-badge[data-kwb-status="ok"]`.
"""

from __future__ import annotations

import html
import re
from typing import Any

from workbench.result import Timing

#: Badge colours: green passes, red is a caught cheat, orange wrong numbers, the rest failures to run.
STATUS_COLORS = {
    "ok": "#2e7d32", "incorrect": "#ef6c00", "rejected": "#c62828", "compile_error": "#6a1b9a",
    "runtime_error": "#8e24aa", "timeout": "#5d4037", "crashed": "#424242",
    # editor states that are not results
    "idle": "#9e9e9e", "running": "#1565c0", "cancelled": "#757575", "error": "#424242",
}

esc = html.escape


def status_badge(status: str, text: str | None = None) -> str:
    color = STATUS_COLORS.get(status, "#757575")
    label = esc(text if text is not None else status)
    return (f'<span class="kwb-badge kwb-status-{esc(status)}" data-kwb-status="{esc(status)}" '
            f'style="background:{color};color:white;border-radius:3px;padding:1px 7px;font-weight:600;'
            f'font-family:monospace">{label}</span>')


def fmt(value: float | None, pattern: str, missing: str = "–") -> str:
    return missing if value is None else pattern.format(value)


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    if ms < 1e-2:
        return f"{ms * 1e3:.3g} µs"
    return f"{ms:.4g} ms"


def timing_text(t: Timing | None) -> str:
    """"1.23 ms [1.20, 1.31] 95% CI, n=50, cuda-events clock": the median with its confidence interval and clock."""
    if t is None:
        return "not timed"
    return (f"{fmt_ms(t.median_ms)} [{fmt_ms(t.ci95_low_ms)}, {fmt_ms(t.ci95_high_ms)}] 95% CI, "
            f"n={t.n}, {t.clock} clock")


def table(headers: list[str], rows: list[list[str]], cls: str, row_attrs: list[str] | None = None) -> str:
    """A plain HTML table; cells are pre-escaped HTML."""
    head = "".join(f'<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #999">{h}</th>'
                   for h in headers)
    body = []
    for i, row in enumerate(rows):
        attrs = f" {row_attrs[i]}" if row_attrs else ""
        body.append(f"<tr{attrs}>" + "".join(f'<td style="padding:2px 8px">{c}</td>' for c in row) + "</tr>")
    return (f'<table class="{cls}" style="border-collapse:collapse"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def as_text(value: Any) -> str:
    return esc("" if value is None else str(value))


def plural(n: int, noun: str, many: str | None = None) -> str:
    """"1 result", "2 results", "0 results"."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


_TICKS = re.compile(r"`([^`\n]+)`")


def rich(text: str) -> str:
    """Escaped text whose `code spans` become <code> elements (messages are written with Markdown backticks)."""
    return _TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", esc(text))


def plain(text: str) -> str:
    """Text for places that cannot hold markup (tooltips): the backticks dropped, the code kept."""
    return _TICKS.sub(lambda m: m.group(1), text)
