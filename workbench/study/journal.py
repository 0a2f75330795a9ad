"""Which points of which study run are done: a table beside the results, so one SQLite file holds a whole
study and a run killed mid-way resumes where it stopped (a point is marked done only after its notebook ran)."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.study.run import PointOutcome


class Journal:
    """Which points of which run are done; lives beside the results so one file holds a whole study."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS study_points (run_id TEXT, point_id TEXT, notebook TEXT, parameters TEXT,"
                " status TEXT, output TEXT, error TEXT, seconds REAL, finished TEXT, PRIMARY KEY (run_id, point_id))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS study_runs (run_id TEXT PRIMARY KEY, notebook TEXT, base TEXT, grid TEXT,"
                " device TEXT, started TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
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

    def start_run(self, run_id: str, notebook: str, base: dict, grid: dict, device: str | None) -> None:
        self._write(
            "INSERT OR IGNORE INTO study_runs VALUES (?,?,?,?,?,?)",
            (run_id, notebook, json.dumps(base, default=str), json.dumps(grid, default=str), device or "",
             _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")),
        )

    def done_points(self, run_id: str) -> set[str]:
        db = self._connect()
        try:
            rows = db.execute("SELECT point_id FROM study_points WHERE run_id=? AND status='done'", (run_id,))
            return {r[0] for r in rows}
        finally:
            db.close()

    def record(self, run_id: str, outcome: PointOutcome) -> None:
        self._write(
            "INSERT OR REPLACE INTO study_points VALUES (?,?,?,?,?,?,?,?,?)",
            (run_id, outcome.point.id, outcome.point.notebook, json.dumps(outcome.point.parameters, default=str),
             outcome.status, outcome.output, outcome.error[-4000:], outcome.seconds,
             _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")),
        )

    def points(self, run_id: str) -> list[dict[str, Any]]:
        db = self._connect()
        try:
            cur = db.execute("SELECT * FROM study_points WHERE run_id=? ORDER BY finished", (run_id,))
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, row, strict=False)) for row in cur]
        finally:
            db.close()

    def runs(self) -> list[dict[str, Any]]:
        db = self._connect()
        try:
            cur = db.execute("SELECT * FROM study_runs ORDER BY started")
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, row, strict=False)) for row in cur]
        finally:
            db.close()
