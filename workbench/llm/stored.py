"""Agent nodes read back from a results store: one row per step, the step's provenance in its metadata.

A run is rebuilt from the rows alone (`lineage(run_id, store=...)`, `fork`, `resume`), so everything a Node
holds besides the reasoning text is stored with the result: the agent's keys in the metadata column and the
LLM call's numbers (tokens, cost, latency, finish reason, temperature, seed) in their `llm_*` columns.
Stores written before those columns existed keep the numbers in the metadata; both are read.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.llm.runs import Node
from workbench.result import Result


def nodes_from_store(store: Any, run_id: str) -> list[Node]:
    frame = store.frame(run_id=run_id)
    nodes = []
    for row in frame.to_dict("records"):
        meta = _row_metadata(row)
        if "node_id" not in meta:
            continue
        result = None
        getter = getattr(store, "get", None)
        if getter is not None and not _is_missing(row.get("id")):
            result = getter(int(row["id"]))  # the exact Result as added: timings and log included
        nodes.append(Node(
            run_id=run_id, node_id=meta["node_id"], turn=int(meta.get("turn", 0)), parent=meta.get("parent_node"),
            parent_run=meta.get("parent_run"), role=meta.get("role", ""), strategy=meta.get("strategy", ""),
            candidate_id=str(row.get("candidate_id", "")), status=str(row.get("status", "")),
            flags=_flags(row.get("flags")), message=str(row.get("message") or "")[:300],
            outcome=meta.get("outcome", "ok"), prompt_id=meta.get("prompt_id", ""), template=meta.get("template", ""),
            author=meta.get("author", ""), time_ms=_row_time(row, result),
            speedup=_num(row.get("speedup")), sol_fraction=_num(row.get("sol_fraction")), bound=row.get("bound"),
            max_abs_err=_num(row.get("max_abs_err")), request_hash=meta.get("request_hash", ""),
            feedback=meta["feedback"] if isinstance(meta.get("feedback"), dict) else {}, feedback_text=meta.get("feedback_text", ""),
            duplicate_of=meta.get("duplicate_of"), source=str(row.get("source") or ""), result=result,
            speedup_ci=_ci(row), speedup_verdict=_text(row.get("speedup_verdict")),
            generation=_int(meta.get("generation"), 0), sample=_int(meta.get("sample"), 0),
            tokens_in=_int(_either(row, meta, "llm_tokens_in"), 0), tokens_out=_int(_either(row, meta, "llm_tokens_out"), 0),
            cost_usd=_num(_either(row, meta, "llm_cost_usd")), cached=bool(meta.get("cached", False)),
            finish_reason=_text(_either(row, meta, "llm_finish_reason")) or "",
            latency_s=_num(_either(row, meta, "llm_latency_s")), temperature=_num(_either(row, meta, "llm_temperature")),
            seed=_int(_either(row, meta, "llm_seed"), None), attempts=_int(meta.get("attempts"), 0),
            continued=_int(meta.get("continued"), 0), error_kind=meta.get("error_kind") or "",
        ))
    nodes.sort(key=lambda n: n.turn)
    return nodes


def _either(row: dict[str, Any], meta: dict[str, Any], key: str) -> Any:
    """A column's value, else the metadata key of the same name (stores written before the column existed)."""
    value = row.get(key)
    return meta.get(key) if _is_missing(value) else value


def _int(value: Any, default: int | None) -> int | None:
    if _is_missing(value):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _text(value: Any) -> str | None:
    return None if _is_missing(value) or value in ("None", "nan") else str(value)


def _ci(row: dict[str, Any]) -> tuple[float, float] | None:
    low, high = _num(row.get("speedup_ci_low")), _num(row.get("speedup_ci_high"))
    return (low, high) if low is not None and high is not None else None


def _row_time(row: dict[str, Any], result: Result | None) -> float | None:
    for key in ("time_ms", "time_median_ms", "median_ms"):
        if key in row and not _is_missing(row[key]):
            return float(row[key])
    return result.time_ms if result is not None else None


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    import pandas as pd

    return value is pd.NA


def _num(value: Any) -> float | None:
    return None if _is_missing(value) else float(value)


def _flags(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if _is_missing(value) or value == "":
        return []
    text = str(value)
    if text.startswith("["):
        try:
            return [str(v) for v in json.loads(text)]
        except json.JSONDecodeError:
            pass
    return [f for f in text.split(",") if f]


def _row_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """The agent's metadata from a store row, wherever the store keeps it (a dict or JSON column, or columns)."""
    meta: dict[str, Any] = {}
    raw = row.get("metadata")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = None
    if isinstance(raw, dict):
        meta.update(raw)
    for key in ("node_id", "parent_node", "parent_run", "turn", "role", "strategy", "prompt_id", "author",
                "outcome", "template", "request_hash", "duplicate_of"):
        if key not in meta and key in row and not _is_missing(row[key]):
            meta[key] = row[key]
    return meta
