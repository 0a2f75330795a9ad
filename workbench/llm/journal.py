"""The agent's run journal: one row per run, beside the results in the same SQLite file.

A result row says what one step produced; the journal says what the run *was*: task, strategy, settings, the
provider's settings (never its key), the fork it started from, where its transcript went, and how it ended
(`running` until it ends; `finished`, `cancelled`, `interrupted` or `failed` after). `resume(run_id)` and
`fork(run_id, node)` read the settings from here, so a resumed or forked run asks with the settings the run
had, not with defaults; `kwb agent list` prints it.

Only stores backed by a file have a journal (an in-memory store lives in one connection of one process).
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

_COLUMNS = ("run_id", "task", "task_hash", "task_spec", "strategy", "settings", "provider", "tags", "fork",
            "transcript", "status", "stop_reason", "error", "usage", "nodes", "started", "updated")
_JSON = ("task_spec", "settings", "provider", "tags", "fork", "usage")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def journal_for(store: Any) -> AgentJournal | None:
    """The journal living in `store`'s file, or None for stores without a file (":memory:", custom ones)."""
    path = getattr(store, "path", None)
    if not path or str(path) == ":memory:":
        return None
    return AgentJournal(path)


class AgentJournal:
    """Run headers and outcomes of agent runs in the table `agent_runs`."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._write("CREATE TABLE IF NOT EXISTS agent_runs (run_id TEXT PRIMARY KEY, task TEXT, task_hash TEXT, "
                    "task_spec TEXT, strategy TEXT, settings TEXT, provider TEXT, tags TEXT, fork TEXT, "
                    "transcript TEXT, status TEXT, stop_reason TEXT, error TEXT, usage TEXT, nodes INTEGER, "
                    "started TEXT, updated TEXT)", ())

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA busy_timeout=60000")
        return db

    def _write(self, sql: str, args: tuple) -> None:
        for attempt in range(20):
            try:
                db = self._connect()
                try:
                    db.execute(sql, args)
                finally:
                    db.close()
                return
            except sqlite3.OperationalError as exc:  # pragma: no cover - only under heavy contention
                if "locked" not in str(exc) or attempt == 19:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def start(self, run_id: str, *, task: Any, strategy: str, settings: dict[str, Any], provider: dict[str, Any],
              tags: dict[str, Any] | None = None, fork: dict[str, Any] | None = None,
              transcript: str | None = None) -> None:
        """Record a run as running; a resumed run keeps its start time and gets its new settings."""
        existing = self.get(run_id)
        started = existing["started"] if existing else _now()
        self._write(f"INSERT OR REPLACE INTO agent_runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                    (run_id, task.name, task.source_hash, json.dumps(task.to_spec(), default=str), strategy,
                     json.dumps(settings, default=str), json.dumps(provider, default=str),
                     json.dumps(tags or {}, default=str), json.dumps(fork, default=str) if fork else None,
                     transcript or (existing or {}).get("transcript"), "running", "", "", None,
                     (existing or {}).get("nodes") or 0, started, _now()))

    def finish(self, run_id: str, *, status: str, stop_reason: str, error: str, usage: dict[str, Any],
               nodes: int) -> None:
        self._write("UPDATE agent_runs SET status=?, stop_reason=?, error=?, usage=?, nodes=?, updated=? WHERE run_id=?",
                    (status, stop_reason, error[-4000:], json.dumps(usage, default=str), nodes, _now(), run_id))

    def get(self, run_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT * FROM agent_runs WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first."""
        return self._read("SELECT * FROM agent_runs ORDER BY started, run_id", ())

    def _read(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        db = self._connect()
        try:
            cur = db.execute(sql, args)
            names = [c[0] for c in cur.description]
            rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        finally:
            db.close()
        for row in rows:
            for key in _JSON:
                row[key] = json.loads(row[key]) if row.get(key) else None
        return rows
