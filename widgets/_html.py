"""HTML fragments shared by the widgets and their static renderings: status badges, a result's verdict panel.

Every fragment carries class names and `data-kwb-*` attributes so a browser test (or a user's CSS) can find
the verdict without parsing text: `.kwb-badge[data-kwb-status="ok"]`, `li.kwb-finding[data-kwb-flag=...]`.
"""

from __future__ import annotations

import html
from typing import Any

from workbench.eval.findings import FLAGS, REJECT, Finding
from workbench.result import Result, Timing

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
    """"1.23 ms [1.20, 1.31] 95% CI, n=50, cuda-events": the median with its confidence interval and clock."""
    if t is None:
        return "not timed"
    return (f"{fmt_ms(t.median_ms)} [{fmt_ms(t.ci95_low_ms)}, {fmt_ms(t.ci95_high_ms)}] 95% CI, "
            f"n={t.n}, {t.clock} clock")


def findings(result: Result) -> list[tuple[str | None, str, str]]:
    """(flag, severity, explanation) for each failed check, from the message lines and the flags.

    The engine writes one `[flag] why (detail). Fix: ...` line per finding into the message; flags whose line
    is missing still get the catalog's explanation, so no flag is ever shown bare.
    """
    out: list[tuple[str | None, str, str]] = []
    lines = [line.strip() for line in (result.message or "").splitlines() if line.strip()]
    seen: set[str] = set()
    for line in lines:
        flag = None
        if line.startswith("[") and "]" in line:
            flag = line[1:line.index("]")]
        if flag is not None:
            seen.add(flag)
            info = FLAGS.get(flag)
            out.append((flag, info.severity if info else REJECT, line))
    for flag in result.flags:
        if flag not in seen:
            out.append((flag, Finding(flag).severity, Finding(flag).line()))
    return out


def findings_html(result: Result) -> str:
    items = findings(result)
    if not items:
        return ""
    lis = "".join(
        f'<li class="kwb-finding kwb-{esc(sev)}" data-kwb-flag="{esc(flag or "")}">{esc(text)}</li>'
        for flag, sev, text in items
    )
    return f'<ul class="kwb-findings" style="margin:4px 0">{lis}</ul>'


def _message_html(result: Result) -> str:
    """The message lines that are not findings (compile errors, tracebacks, worker output)."""
    rest = [line for line in (result.message or "").splitlines() if not line.strip().startswith("[")]
    text = "\n".join(rest).strip()
    parts = []
    if text:
        parts.append(f'<pre class="kwb-message" style="white-space:pre-wrap;max-height:14em;overflow:auto;'
                     f'background:#f7f7f7;padding:4px">{esc(text)}</pre>')
    if result.log and result.status in ("crashed", "timeout", "runtime_error", "compile_error"):
        parts.append(f'<details><summary>worker output</summary><pre class="kwb-log" style="white-space:pre-wrap;'
                     f'max-height:14em;overflow:auto">{esc(result.log[-4000:])}</pre></details>')
    return "".join(parts)


def stats_rows(result: Result) -> list[tuple[str, str]]:
    """(label, value) rows of the numbers worth showing for this result; unknown numbers are left out."""
    rows: list[tuple[str, str]] = []
    if result.max_abs_err is not None:
        rows.append(("max abs error", f"{result.max_abs_err:.3g}"))
    if result.max_rel_err is not None:
        rows.append(("max rel error", f"{result.max_rel_err:.3g}"))
    if result.timing is not None:
        rows.append(("time (median)", timing_text(result.timing)))
    if result.reference_timing is not None:
        rows.append(("reference (eager)", timing_text(result.reference_timing)))
    if result.compiled_reference_timing is not None:
        rows.append(("torch.compile", timing_text(result.compiled_reference_timing)))
    if result.speedup is not None:
        rows.append(("speedup vs eager", f"{result.speedup:.2f}x"))
    if result.speedup_vs_compile is not None:
        rows.append(("speedup vs torch.compile", f"{result.speedup_vs_compile:.2f}x"))
    if result.sol_fraction is not None:
        bound = f" ({result.bound}-bound)" if result.bound else ""
        rows.append(("speed of light", f"{result.sol_fraction:.0%} of the roofline floor{bound}"))
    if result.timing is not None and result.timing.clock == "interpreter":
        rows.append(("note", "Triton interpreter time: correctness only, not comparable with compiled code"))
    return rows


def result_html(result: Result) -> str:
    """The verdict panel: badge, what failed and why, error statistics, timing with its CI."""
    size = " ".join(f"{k}={v}" for k, v in result.size.items())
    head = (f'<div class="kwb-headline">{status_badge(result.status)} <b>{esc(result.candidate_name)}</b> '
            f'on <code>{esc(result.task)}</code>'
            + (f" · {esc(size)}" if size else "") + f" · {esc(result.device_name or result.device)}</div>")
    rows = stats_rows(result)
    table = ""
    if rows:
        body = "".join(f'<tr><th style="text-align:left;padding-right:1em;font-weight:normal;color:#555">{esc(k)}</th>'
                       f"<td>{esc(v)}</td></tr>" for k, v in rows)
        table = f'<table class="kwb-stats" style="border-collapse:collapse;margin-top:4px">{body}</table>'
    warn = ""
    if result.warnings:
        warn = ('<ul class="kwb-warnings" style="color:#8d6e00;margin:4px 0">'
                + "".join(f"<li>{esc(w)}</li>" for w in result.warnings) + "</ul>")
    return (f'<div class="kwb-result" data-kwb-status="{esc(result.status)}">{head}{findings_html(result)}'
            f"{_message_html(result)}{table}{warn}</div>")


def state_html(state: str, text: str = "") -> str:
    """A panel for a non-result state (idle, running, cancelled, error) with the same badge markup."""
    return (f'<div class="kwb-result" data-kwb-status="{esc(state)}">{status_badge(state)} '
            f"<span>{esc(text)}</span></div>")


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
