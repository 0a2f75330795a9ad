"""One flat record per result, whether it came from a live `Result` or from a row of `Store.frame()`.

The views (table, variant plot, roofline) read both: fresh results arrive as `Result` objects while a
reopened notebook only has the store. Normalizing once here keeps every view free of "which kind is it".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from workbench.result import STATUSES, Result


def _num(value: Any) -> float | None:
    """A finite float or None (store rows carry NaN for missing numbers)."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _json(value: Any, default: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return default
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else value


def parse_flags(value: Any) -> list[str]:
    """Flags as a list whatever the storage: a list, a JSON list, or comma-separated text."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            parsed = _json(text, [])
            return [str(v) for v in parsed] if isinstance(parsed, list) else []
        return [part.strip() for part in text.split(",") if part.strip()]
    return []


def size_label(size: Any) -> str:
    """`{"M": 64, "N": 32}` -> "M=64 N=32"; the x-axis label of size sweeps."""
    size = _json(size, size)
    if isinstance(size, dict):
        return " ".join(f"{k}={v}" for k, v in size.items()) or "default"
    return str(size) if size not in (None, "") else "default"


def size_order(size: Any) -> tuple[float, str]:
    """Sort key for sizes: the product of the numeric entries (total work), then the label."""
    size = _json(size, size)
    work = 1.0
    if isinstance(size, dict):
        for value in size.values():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                work *= float(value)
    return work, size_label(size)


@dataclass
class Record:
    """What the views show about one evaluation. Numbers are None when unknown, never NaN."""

    task: str
    name: str
    status: str
    flags: list[str] = field(default_factory=list)
    size: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    device_name: str = ""
    dtype: str = ""
    time_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    clock: str | None = None
    ref_ms: float | None = None
    ref_clock: str | None = None
    compile_ms: float | None = None
    compile_clock: str | None = None
    speedup: float | None = None
    sol_fraction: float | None = None
    flops: float | None = None
    bytes: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    bound: str | None = None
    message: str = ""
    candidate_id: str = ""
    source_hash: str = ""
    source: str = ""
    timestamp: str = ""

    @property
    def size_label(self) -> str:
        return size_label(self.size)

    @classmethod
    def from_result(cls, r: Result) -> Record:
        t, ref, comp = r.timing, r.reference_timing, r.compiled_reference_timing
        return cls(
            task=r.task, name=r.candidate_name, status=r.status, flags=list(r.flags), size=dict(r.size),
            device=r.device, device_name=r.device_name or "", dtype=r.dtype or "",
            time_ms=_num(t.median_ms) if t else None,
            ci_low_ms=_num(t.ci95_low_ms) if t else None, ci_high_ms=_num(t.ci95_high_ms) if t else None,
            clock=t.clock if t else None, ref_ms=_num(ref.median_ms) if ref else None,
            ref_clock=ref.clock if ref else None, compile_ms=_num(comp.median_ms) if comp else None,
            compile_clock=comp.clock if comp else None, speedup=_num(r.speedup), sol_fraction=_num(r.sol_fraction),
            flops=_num(r.flops), bytes=_num(r.bytes), achieved_flops_per_s=_num(r.achieved_flops_per_s),
            achieved_bytes_per_s=_num(r.achieved_bytes_per_s), bound=r.bound, message=r.message,
            candidate_id=r.candidate_id, source_hash=r.source_hash, source=r.source, timestamp=r.timestamp,
        )

    @classmethod
    def from_row(cls, row: Any) -> Record:
        """From one row (a mapping or pandas Series) of `Store.frame()`; absent columns stay None."""
        get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))

        def first(*keys: str) -> Any:
            for key in keys:
                value = get(key, None)
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    return value
            return None

        ci = _json(first("ci", "ci95_ms"), None)
        low = high = None
        if isinstance(ci, (list, tuple)) and len(ci) == 2:
            low, high = _num(ci[0]), _num(ci[1])
        size = _json(first("size"), {})
        return cls(
            task=str(first("task") or ""), name=str(first("candidate_name", "candidate") or ""),
            status=str(first("status") or ""), flags=parse_flags(first("flags")),
            size=size if isinstance(size, dict) else {}, device=str(first("device") or "cpu"),
            device_name=str(first("device_name") or ""), dtype=str(first("dtype") or ""),
            time_ms=_num(first("time_median_ms", "time_ms")),
            ci_low_ms=low if low is not None else _num(first("time_ci95_low_ms", "ci95_low_ms")),
            ci_high_ms=high if high is not None else _num(first("time_ci95_high_ms", "ci95_high_ms")),
            clock=first("clock", "time_clock"), ref_ms=_num(first("ref_median_ms", "reference_time_ms")),
            # The store keeps one clock per row: the reference was timed in the same worker by the same timer.
            ref_clock=first("ref_clock", "clock"),
            compile_ms=_num(first("compiled_ref_median_ms", "compiled_reference_time_ms")),
            compile_clock=first("compile_clock", "clock"),
            speedup=_num(first("speedup")), sol_fraction=_num(first("sol_fraction")), flops=_num(first("flops")),
            bytes=_num(first("bytes")), achieved_flops_per_s=_num(first("achieved_flops_per_s")),
            achieved_bytes_per_s=_num(first("achieved_bytes_per_s")), bound=first("bound"),
            message=str(first("message") or ""), candidate_id=str(first("candidate_id") or ""),
            source_hash=str(first("source_hash") or ""), source=str(first("source") or ""),
            timestamp=str(first("timestamp") or ""),
        )


def to_records(items: Any) -> list[Record]:
    """Records from Results, Records, a DataFrame of store rows, or None."""
    if items is None:
        return []
    if hasattr(items, "iterrows"):
        return [Record.from_row(row) for _, row in items.iterrows()]
    out = []
    for item in items:
        if isinstance(item, Record):
            out.append(item)
        elif isinstance(item, Result):
            out.append(Record.from_result(item))
        else:
            out.append(Record.from_row(item))
    return out


#: Status sort order: passing first, then wrong numbers, caught cheats, and failures to run.
STATUS_ORDER = {s: i for i, s in enumerate(("ok", "incorrect", "rejected", "runtime_error", "compile_error",
                                             "timeout", "crashed"))}
for _i, _s in enumerate(STATUSES):
    STATUS_ORDER.setdefault(_s, len(STATUS_ORDER) + _i)
