"""The numbers of a study report, as text a reader can share: human column names with units, no `NaN`.

Everything here is plain pandas and strings (no plotly), so the report's content is testable on its own:
`results_view` is the results table as displayed, `best_per_task_size` picks winners only among results of the
same task, size, dtype and device (a 4 KB run is never compared with a 4 MB one), `flag_counts` counts each
check per candidate.
"""

from __future__ import annotations

import json
import math
from typing import Any

from workbench.result import kernel_policy_text

#: What a missing number says. Interpreter times have no speedup by design, and the report says so.
NA = "n/a"
NA_INTERPRETER = "n/a (interpreter)"

#: Frame column -> table header, with units. Only columns listed here are ever shown.
HEADERS = {
    "task": "task", "candidate_name": "candidate", "size": "size", "dtype": "dtype", "device": "device",
    "status": "status", "flags": "flags", "time": "time (ms), median [95% CI]", "clock": "clock",
    "ref": "reference (ms)", "speedup": "speedup (x) [95% CI]", "speedup_verdict": "verdict",
    "speedup_basis": "speedup basis", "sol": "speed of light (%)", "bound": "bound", "coverage": "coverage (%)",
    "max_abs_err": "max abs error", "max_rel_err": "max rel error", "precision": "precision",
    "kernel_policy": "kernel policy", "sandbox": "sandbox", "message": "message",
}


def missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in ("", "nan", "none", "null")


def number(value: Any, pattern: str = "{:.4g}", na: str = NA) -> str:
    if missing(value):
        return na
    try:
        return pattern.format(float(value))
    except (TypeError, ValueError):
        return na


def text(value: Any, na: str = "") -> str:
    return na if missing(value) else str(value)


def size_label(size: Any) -> str:
    """{"batch_size": 4, "dim": 64} -> "batch_size=4, dim=64"."""
    if isinstance(size, str):
        try:
            size = json.loads(size)
        except json.JSONDecodeError:
            return size
    if isinstance(size, dict):
        return ", ".join(f"{k}={v}" for k, v in size.items()) or "(default)"
    return text(size, "(default)")


def size_order(size: Any) -> tuple:
    """Sort key: problems by element count (product of the numeric sizes), then by label."""
    if isinstance(size, str):
        try:
            size = json.loads(size)
        except json.JSONDecodeError:
            size = {}
    prod = 1.0
    if isinstance(size, dict):
        for v in size.values():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                prod *= float(v)
    return (prod, size_label(size))


def flags_text(flags: Any) -> str:
    if isinstance(flags, (list, tuple)):
        return ", ".join(map(str, flags))
    return text(flags)


def time_cell(row: dict[str, Any]) -> str:
    """"1.23 [1.20, 1.31]": the median with its 95% confidence interval, in ms."""
    median = row.get("time_median_ms")
    if missing(median):
        return NA
    low, high = row.get("time_ci95_low_ms"), row.get("time_ci95_high_ms")
    if missing(low) or missing(high):
        return number(median)
    return f"{number(median)} [{number(low)}, {number(high)}]"


def speedup_cell(row: dict[str, Any]) -> str:
    """"1.52 [1.41, 1.60]"; interpreter times say why there is no speedup instead of printing NaN."""
    value = row.get("speedup")
    if missing(value):
        return NA_INTERPRETER if row.get("clock") == "interpreter" else NA
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    if missing(low) or missing(high):
        return number(value, "{:.3g}")
    return f"{number(value, '{:.3g}')} [{number(low, '{:.3g}')}, {number(high, '{:.3g}')}]"


def percent(value: Any) -> str:
    return NA if missing(value) else f"{100 * float(value):.1f}"


def first_line(message: Any, limit: int = 160) -> str:
    line = next((ln.strip() for ln in text(message).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _row_values(row: dict[str, Any]) -> dict[str, str]:
    interp = row.get("clock") == "interpreter"
    return {
        "task": text(row.get("task")), "candidate_name": text(row.get("candidate_name")),
        "size": size_label(row.get("size")), "dtype": text(row.get("dtype"), NA), "device": text(row.get("device")),
        "status": text(row.get("status")), "flags": flags_text(row.get("flags")), "time": time_cell(row),
        "clock": text(row.get("clock"), NA),
        # An interpreter time beside the reference's compiled time invites a comparison that means nothing.
        "ref": NA_INTERPRETER if interp else number(row.get("ref_median_ms")),
        "speedup": speedup_cell(row),
        "speedup_verdict": text(row.get("speedup_verdict"), NA_INTERPRETER if interp else NA),
        "speedup_basis": text(row.get("speedup_basis"), NA), "sol": percent(row.get("sol_fraction")),
        "bound": text(row.get("bound"), NA), "coverage": percent(row.get("coverage")),
        "max_abs_err": number(row.get("max_abs_err"), "{:.3g}"), "max_rel_err": number(row.get("max_rel_err"), "{:.3g}"),
        "precision": text(row.get("precision"), NA), "kernel_policy": text(kernel_policy_text(v) if isinstance(v := row.get("kernel_policy"), str) else v, NA),
        "sandbox": text(row.get("sandbox"), NA), "message": first_line(row.get("message")),
    }


#: Columns shown only when at least one row has a value (fields newer stores carry, GPU-only numbers).
OPTIONAL = ("ref", "speedup", "speedup_verdict", "speedup_basis", "sol", "bound", "coverage", "max_abs_err",
            "max_rel_err", "precision", "kernel_policy", "sandbox", "flags")


def table_rows(records: list[dict[str, Any]], columns: list[str]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows of display text) for `columns` (keys of HEADERS); optional columns that are empty in
    every row are dropped, so a CPU run's table is not half "n/a"."""
    values = [_row_values(r) for r in records]
    keep = [c for c in columns
            if c not in OPTIONAL or any(v[c] not in ("", NA, NA_INTERPRETER) for v in values)
            or (c == "speedup" and values)]
    return [HEADERS[c] for c in keep], [[v[c] for c in keep] for v in values]


def records(frame) -> list[dict[str, Any]]:
    """Frame rows as dicts with NaN turned into None (pandas gives NaN for missing floats)."""
    if frame is None or len(frame) == 0:
        return []
    out = []
    for row in frame.to_dict("records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})
    return out


def best_per_task_size(frame) -> list[dict[str, Any]]:
    """The fastest passing result for each (task, size, dtype, device, clock): winners among comparable runs."""
    rows = [r for r in records(frame) if r.get("status") == "ok" and not missing(r.get("time_median_ms"))]
    best: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r.get("task"), size_label(r.get("size")), text(r.get("dtype")), text(r.get("device")),
               text(r.get("clock")))
        if key not in best or r["time_median_ms"] < best[key]["time_median_ms"]:
            best[key] = r
    return sorted(best.values(), key=lambda r: (text(r.get("task")), size_order(r.get("size")), text(r.get("device"))))


def flag_counts(frame) -> tuple[list[str], list[list[str]]]:
    """Per candidate: results, how many passed, and how often each check fired."""
    rows = records(frame)
    flags = sorted({f for r in rows for f in (r.get("flags") or [])})
    per: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        key = (text(r.get("task")), text(r.get("candidate_name")))
        counts = per.setdefault(key, {"results": 0, "ok": 0})
        counts["results"] += 1
        counts["ok"] += r.get("status") == "ok"
        for f in r.get("flags") or []:
            counts[f] = counts.get(f, 0) + 1
    headers = ["task", "candidate", "results", "ok", *flags]
    body = [[task, cand, str(c["results"]), str(c["ok"]), *[str(c.get(f, 0)) for f in flags]]
            for (task, cand), c in sorted(per.items())]
    return headers, body


def status_counts(frame) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records(frame):
        out[text(r.get("status"), "unknown")] = out.get(text(r.get("status"), "unknown"), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "ok", kv[0])))


def failed_results(frame) -> list[dict[str, Any]]:
    return [r for r in records(frame) if r.get("status") not in ("ok", None)]


def split_common(headers: list[str], rows: list[list[str]], keep: tuple[str, ...] = ("task", "candidate", "status")
                 ) -> tuple[list[str], list[list[str]], list[tuple[str, str]]]:
    """(headers, rows, [(header, value)]) with the columns that hold one value in every row taken out, so a wide
    table shows what differs and says the rest once. Columns in `keep` stay; one row keeps all."""
    if len(rows) < 2:
        return headers, rows, []
    common = [i for i, h in enumerate(headers)
              if h not in keep and len({row[i] for row in rows}) == 1 and rows[0][i] not in ("", NA)]
    shown = [i for i in range(len(headers)) if i not in common]
    return ([headers[i] for i in shown], [[row[i] for i in shown] for row in rows],
            [(headers[i], rows[0][i]) for i in common])
