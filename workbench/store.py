"""Results store: every evaluation (failed ones too) as one SQLite row with its provenance.

SQLite from the standard library, because a study's results should be one file that a laptop, a GPU node
and a notebook can all open, and several worker processes can append to at once. Design choices:

* WAL mode, so readers never block the writers of a running study.
* Short `BEGIN IMMEDIATE` transactions retried on "database is locked": a write never waits while holding
  a read snapshot, and a busy moment costs a retry, not a lost row.
* Scalar Result fields get columns (for SQL and DataFrames); the full Result is kept as JSON beside them,
  so `get(id)` gives back exactly what was added, including fields no column holds (log, details).
* Candidate sources live in their own table keyed by hash: an agent that proposes the same kernel many
  times stores its text once.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workbench.errors import StoreError
from workbench.result import Result

if TYPE_CHECKING:
    import pandas as pd

_T = TypeVar("_T")

#: Bumped when the tables change; a store written by a newer version is refused, never half-read.
SCHEMA_VERSION = 3

#: (column, SQL type) of the results table after `id`, in the order frames show them.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("task", "TEXT"), ("candidate_id", "TEXT"), ("candidate_name", "TEXT"), ("language", "TEXT"),
    ("status", "TEXT"), ("message", "TEXT"), ("flags", "TEXT"), ("warnings", "TEXT"), ("size", "TEXT"),
    ("dtype", "TEXT"), ("device", "TEXT"), ("device_name", "TEXT"),
    ("max_abs_err", "REAL"), ("max_rel_err", "REAL"),
    ("time_median_ms", "REAL"), ("time_min_ms", "REAL"), ("time_max_ms", "REAL"), ("time_iqr_ms", "REAL"),
    ("time_ci95_low_ms", "REAL"), ("time_ci95_high_ms", "REAL"), ("time_n", "INTEGER"), ("clock", "TEXT"),
    ("ref_median_ms", "REAL"), ("compiled_ref_median_ms", "REAL"), ("speedup", "REAL"),
    ("speedup_vs_compile", "REAL"), ("flops", "REAL"), ("bytes", "REAL"), ("achieved_flops_per_s", "REAL"),
    ("achieved_bytes_per_s", "REAL"), ("sol_fraction", "REAL"), ("bound", "TEXT"),
    ("source_hash", "TEXT"), ("task_hash", "TEXT"), ("seed", "INTEGER"), ("versions", "TEXT"),
    ("timestamp", "TEXT"), ("run_id", "TEXT"), ("point_id", "TEXT"), ("parent_id", "TEXT"),
    ("prompt_id", "TEXT"), ("metadata", "TEXT"),
    # schema 2: verdict fidelity and trust boundary
    ("speedup_ci_low", "REAL"), ("speedup_ci_high", "REAL"), ("speedup_verdict", "TEXT"), ("speedup_basis", "TEXT"),
    ("coverage", "REAL"), ("kernel_policy", "TEXT"), ("precision", "TEXT"), ("sandbox", "TEXT"),
    ("stop_reason", "TEXT"),
    # schema 3: the LLM call behind an agent's candidate (NULL for every other row)
    ("llm_model", "TEXT"), ("llm_tokens_in", "INTEGER"), ("llm_tokens_out", "INTEGER"), ("llm_cost_usd", "REAL"),
    ("llm_latency_s", "REAL"), ("llm_finish_reason", "TEXT"), ("llm_temperature", "REAL"), ("llm_seed", "INTEGER"),
)
#: Columns each schema version added, so an older store is upgraded in place (ALTER TABLE ADD COLUMN).
_ADDED_IN = {2: ("speedup_ci_low", "speedup_ci_high", "speedup_verdict", "speedup_basis", "coverage",
                 "kernel_policy", "precision", "sandbox", "stop_reason"),
             3: ("llm_model", "llm_tokens_in", "llm_tokens_out", "llm_cost_usd", "llm_latency_s", "llm_finish_reason",
                 "llm_temperature", "llm_seed")}
#: Columns filled from `add()`'s keyword arguments (the agent passes them), not from the Result.
LLM_COLUMNS = _ADDED_IN[3]
_INTEGERS = tuple(name for name, kind in COLUMNS if kind == "INTEGER")
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
_JSON_LIST = ("flags", "warnings")
_JSON_DICT = ("size", "versions", "metadata")
_FLOATS = tuple(name for name, kind in COLUMNS if kind == "REAL")
_TEXTS = tuple(name for name, kind in COLUMNS if kind == "TEXT" and name not in _JSON_LIST + _JSON_DICT)

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS kwb_schema (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    + ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    + ", result_json TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sources (source_hash TEXT PRIMARY KEY, language TEXT, source TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS results_point ON results (task, candidate_id, size, device)",
    "CREATE INDEX IF NOT EXISTS results_run ON results (run_id, point_id)",
]

_RETRIES = 60
_BUSY_TIMEOUT_S = 30.0
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _jsonable(value: Any) -> Any:
    """Fallback for json.dumps: numpy scalars/arrays, tensors, dtypes and sets become plain JSON."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def _dumps(value: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(value, default=_jsonable, sort_keys=sort_keys)


def size_key(size: dict[str, Any] | str | None) -> str:
    """Canonical text of a size dict (sorted keys), so equal sizes compare equal in SQL."""
    if isinstance(size, str):
        size = json.loads(size)
    return _dumps(size or {}, sort_keys=True)


def _source_key(result: Result) -> str:
    if result.source_hash:
        return result.source_hash
    if not result.source:
        return ""
    import hashlib

    return hashlib.sha256(result.source.encode()).hexdigest()[:16]


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def result_row(result: Result, run_id: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The column values of one result. `metadata` (add()'s keyword arguments) overrides result.metadata."""
    meta = {**result.metadata, **(metadata or {})}
    timing, ref, compiled = result.timing, result.reference_timing, result.compiled_reference_timing
    if timing is not None and timing.clock == "interpreter":  # never set beside compiled code (older results had it)
        ref = compiled = None
    return {
        "task": result.task, "candidate_id": result.candidate_id, "candidate_name": result.candidate_name,
        "language": result.language, "status": result.status, "message": result.message,
        "flags": _dumps(list(result.flags)), "warnings": _dumps(list(result.warnings)),
        "size": size_key(result.size), "dtype": result.dtype, "device": result.device,
        "device_name": result.device_name, "max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
        "time_median_ms": timing.median_ms if timing else None,
        "time_min_ms": timing.min_ms if timing else None,
        "time_max_ms": timing.max_ms if timing else None,
        "time_iqr_ms": timing.iqr_ms if timing else None,
        "time_ci95_low_ms": timing.ci95_low_ms if timing else None,
        "time_ci95_high_ms": timing.ci95_high_ms if timing else None,
        "time_n": timing.n if timing else None,
        "clock": timing.clock if timing else None,
        "ref_median_ms": ref.median_ms if ref else None,
        "compiled_ref_median_ms": compiled.median_ms if compiled else None,
        "speedup": result.speedup, "speedup_vs_compile": result.speedup_vs_compile,
        "flops": result.flops, "bytes": result.bytes, "achieved_flops_per_s": result.achieved_flops_per_s,
        "achieved_bytes_per_s": result.achieved_bytes_per_s, "sol_fraction": result.sol_fraction,
        "bound": result.bound, "source_hash": _source_key(result), "task_hash": result.task_hash,
        "seed": result.seed, "versions": _dumps(result.versions), "timestamp": result.timestamp,
        "run_id": run_id if run_id is not None else meta.get("run_id"),
        "point_id": _text(meta.get("point_id")), "parent_id": _text(meta.get("parent_id")),
        "prompt_id": _text(meta.get("prompt_id")), "metadata": _dumps(meta),
        "speedup_ci_low": result.speedup_ci[0] if result.speedup_ci else None,
        "speedup_ci_high": result.speedup_ci[1] if result.speedup_ci else None,
        "speedup_verdict": result.speedup_verdict, "speedup_basis": result.speedup_basis or None,
        "coverage": result.coverage, "kernel_policy": result.kernel_policy or None,
        "precision": result.precision or None, "sandbox": result.sandbox or None,
        "stop_reason": timing.stop_reason or None if timing else None,
        **{name: _llm_value(name, meta.get(name)) for name in LLM_COLUMNS},
    }


def _llm_value(name: str, value: Any) -> Any:
    """An `llm_*` column's value as SQLite should hold it (None for missing or unreadable values)."""
    if value is None:
        return None
    kind = dict(COLUMNS)[name]
    try:
        if kind == "INTEGER":
            return int(value)
        if kind == "REAL":
            return float(value)
    except (TypeError, ValueError):
        return None
    return str(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class Store:
    """A results database. `Store("results.db")` creates it if needed; `":memory:"` gives a throwaway one.

        with wb.Store("results.db") as store:
            row = store.add(result, run_id="exp1", model="gpt-x")
            store.frame(task="softmax", status="ok")
    """

    def __init__(self, path: str | Path = "results.db", *, timeout: float = _BUSY_TIMEOUT_S):
        self.path = str(path)
        self.timeout = timeout
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        # Connections inherited through fork() are kept, never used or closed: closing one in the child
        # could checkpoint or unlink the parent's WAL under it.
        self._inherited: list[sqlite3.Connection] = []
        #: How many times a write found the database locked and retried (a contention diagnostic).
        self.retries = 0
        if self.path != ":memory:":
            Path(self.path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        self._retry(self._init_schema)

    # ---- connection and transactions -------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is not None and self._pid == os.getpid():
            return self._db
        if self._db is not None:
            self._inherited.append(self._db)
        try:
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise
            raise StoreError(
                f"cannot open results store {self.path}: {exc}. Check that the path is a workbench store "
                "(an SQLite file) on a local disk, or choose another path."
            ) from exc
        self._journal_mode = str(mode).lower()
        self._db, self._pid = db, os.getpid()
        return db

    def _retry(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `work(db)` in one IMMEDIATE transaction, retrying while another process holds the lock."""
        delay = 0.005
        for attempt in range(_RETRIES):
            with self._lock:
                db = None
                try:
                    db = self._connect()
                    db.execute("BEGIN IMMEDIATE")
                    out = work(db)
                    db.execute("COMMIT")
                    return out
                except sqlite3.OperationalError as exc:
                    if db is not None and db.in_transaction:
                        db.execute("ROLLBACK")
                    if not _is_busy(exc) or attempt == _RETRIES - 1:
                        raise StoreError(
                            f"results store {self.path}: {exc}. If another process holds it for long, "
                            "retry later or give each job its own store and merge them."
                        ) from exc
                    self.retries += 1
                except BaseException:
                    if db is not None and db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
        for attempt in range(_RETRIES):
            with self._lock:
                try:
                    cur = self._connect().execute(sql, tuple(args))
                    names = [c[0] for c in cur.description or ()]
                    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc) or attempt == _RETRIES - 1:
                        raise StoreError(f"results store {self.path}: {exc}") from exc
            time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _init_schema(self, db: sqlite3.Connection) -> None:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "kwb_schema" in tables:
            row = db.execute("SELECT MAX(version) FROM kwb_schema").fetchone()
            version = row[0] if row and row[0] is not None else None
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(
                    f"results store {self.path} has schema version {version}, newer than this kernel-workbench "
                    f"understands ({SCHEMA_VERSION}). Upgrade with `pip install -U kernel-workbench`, "
                    "or open it with the version that wrote it."
                )
        elif "results" in tables:
            raise StoreError(
                f"{self.path} has a `results` table that no workbench store wrote (no kwb_schema table); "
                "choose another path for the store."
            )
        for statement in _SCHEMA:
            db.execute(statement)
        if db.execute("SELECT COUNT(*) FROM kwb_schema").fetchone()[0] == 0:
            db.execute("INSERT INTO kwb_schema (version) VALUES (?)", (SCHEMA_VERSION,))
        self._upgrade(db)

    @staticmethod
    def _upgrade(db: sqlite3.Connection) -> None:
        """Add the columns later schema versions introduced to a store an older version wrote; rows keep NULLs."""
        have = {r[1] for r in db.execute("PRAGMA table_info(results)")}
        kinds = dict(COLUMNS)
        for version in sorted(_ADDED_IN):
            for name in _ADDED_IN[version]:
                if name not in have:
                    db.execute(f"ALTER TABLE results ADD COLUMN {name} {kinds[name]}")
        if db.execute("SELECT MAX(version) FROM kwb_schema").fetchone()[0] < SCHEMA_VERSION:
            db.execute("UPDATE kwb_schema SET version = ?", (SCHEMA_VERSION,))

    @property
    def journal_mode(self) -> str:
        """"wal" for file stores (what concurrent writers need); "memory" for ":memory:"."""
        with self._lock:
            self._connect()
            return self._journal_mode

    @property
    def schema_version(self) -> int:
        return int(self._read("SELECT MAX(version) AS v FROM kwb_schema")[0]["v"])

    # ---- writing -----------------------------------------------------------------------------------------
    @staticmethod
    def _insert(db: sqlite3.Connection, result: Result, run_id: str | None, metadata: dict[str, Any]) -> int:
        if not isinstance(result, Result):
            raise StoreError(f"Store.add takes a workbench Result, got {type(result).__name__}")
        row = result_row(result, run_id, metadata)
        data = result.to_dict()
        if result.source:
            # The text lives once in `sources`; get() puts it back. An empty source stays in the JSON as is.
            db.execute("INSERT OR IGNORE INTO sources (source_hash, language, source) VALUES (?, ?, ?)",
                       (row["source_hash"], result.language, result.source))
            data.pop("source")
        names = [*COLUMN_NAMES, "result_json"]
        values = [row[n] for n in COLUMN_NAMES] + [_dumps(data)]
        cur = db.execute(f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)
        assert cur.lastrowid is not None  # set by every INSERT
        return int(cur.lastrowid)

    def add(self, result: Result, run_id: str | None = None, **metadata: Any) -> int:
        """Store one result; keyword arguments (model, prompt_id, point_id...) go into its metadata column.
        Returns the new row id."""
        return self._retry(lambda db: self._insert(db, result, run_id, metadata))

    def add_many(self, results: Iterable[Result], run_id: str | None = None, **metadata: Any) -> list[int]:
        """Store several results in one transaction (all or none)."""
        results = list(results)
        return self._retry(lambda db: [self._insert(db, r, run_id, metadata) for r in results])

    def delete_run(self, run_id: str) -> int:
        """Remove every result of a run; returns how many rows went."""
        return self._delete("run_id = ?", (run_id,))

    def delete_point(self, run_id: str, point_id: str) -> int:
        """Remove the results of one study point (a point re-run after a kill starts clean)."""
        return self._delete("run_id = ? AND point_id = ?", (run_id, point_id))

    def _delete(self, where: str, args: tuple) -> int:
        def work(db: sqlite3.Connection) -> int:
            n = db.execute(f"DELETE FROM results WHERE {where}", args).rowcount
            db.execute("DELETE FROM sources WHERE source_hash NOT IN (SELECT source_hash FROM results "
                       "WHERE source_hash IS NOT NULL)")
            return n

        return self._retry(work)

    # ---- reading -----------------------------------------------------------------------------------------
    def get(self, row_id: int) -> Result:
        """The Result stored under `row_id`, exactly as it was added."""
        rows = self._read("SELECT r.result_json, r.source_hash, s.source FROM results r LEFT JOIN sources s "
                          "ON s.source_hash = r.source_hash WHERE r.id = ?", (int(row_id),))
        if not rows:
            raise StoreError(f"results store {self.path} has no row {row_id}; `kwb results` lists the rows")
        data = json.loads(rows[0]["result_json"])
        if "source" not in data:
            data["source"] = rows[0]["source"] or ""
        return Result.from_dict(data)

    def source(self, source_hash: str) -> str:
        """A candidate's source text by its hash (the `source_hash` column)."""
        rows = self._read("SELECT source FROM sources WHERE source_hash = ?", (source_hash,))
        if not rows:
            raise StoreError(f"no source with hash {source_hash!r} in {self.path}; take it from a row's source_hash")
        return rows[0]["source"]

    def has(self, task: str, candidate_id: str, size: dict[str, Any] | str | None, device: str,
            run_id: str | None = None) -> bool:
        """Whether this point was evaluated already (any status), optionally within one run: lets a rerun
        skip the work it finished before."""
        sql = "SELECT 1 FROM results WHERE task = ? AND candidate_id = ? AND size = ? AND device = ?"
        args: list[Any] = [task, candidate_id, size_key(size), device]
        if run_id is not None:
            sql += " AND run_id = ?"
            args.append(run_id)
        return bool(self._read(sql + " LIMIT 1", args))

    def _where(self, filters: dict[str, Any]) -> tuple[str, list[Any]]:
        clauses, args = [], []
        for key, value in filters.items():
            if value is None:
                continue
            if key in COLUMN_NAMES or key == "id":
                target = f"r.{key}"
                if key == "size":
                    value = size_key(value)
                elif key in _JSON_LIST + _JSON_DICT:
                    value = _dumps(value)
            elif _KEY.match(key):
                target = f"json_extract(r.metadata, '$.{key}')"
            else:
                raise StoreError(f"cannot filter on {key!r}: use a column name or a metadata key (letters, digits, _)")
            if isinstance(value, (list, tuple, set, frozenset)) and key not in _JSON_LIST:
                values = list(value)
                clauses.append(f"{target} IN ({', '.join('?' * len(values))})" if values else "0")
                args.extend(values)
            else:
                clauses.append(f"{target} = ?")
                args.append(value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def frame(self, task: str | None = None, status: str | None = None, run_id: str | None = None,
              *, source: bool = True, **filters: Any) -> pd.DataFrame:
        """A tidy DataFrame, one row per result, oldest first. Filters match columns (a list means "any of")
        or metadata keys; `flags`/`warnings` are list columns, `size`/`versions`/`metadata` dict columns."""
        import pandas as pd

        where, args = self._where({"task": task, "status": status, "run_id": run_id, **filters})
        cols = ", ".join(f"r.{n}" for n in ("id", *COLUMN_NAMES))
        if source:
            sql = f"SELECT {cols}, s.source FROM results r LEFT JOIN sources s ON s.source_hash = r.source_hash"
        else:
            sql = f"SELECT {cols} FROM results r"
        rows = self._read(f"{sql}{where} ORDER BY r.id", args)
        names = ["id", *COLUMN_NAMES] + (["source"] if source else [])
        for row in rows:
            for key in _JSON_LIST:
                row[key] = json.loads(row[key]) if row[key] else []
            for key in _JSON_DICT:
                row[key] = json.loads(row[key]) if row[key] else {}
        frame = pd.DataFrame.from_records(rows, columns=names)
        for key in _FLOATS:
            frame[key] = pd.to_numeric(frame[key], errors="coerce").astype("float64")
        frame["id"] = frame["id"].astype("int64")
        for key in _INTEGERS:
            frame[key] = pd.to_numeric(frame[key]).astype("Int64")
        if int(pd.__version__.split(".")[0]) >= 3:
            # One text dtype whatever the rows hold (all-None columns would otherwise come out as object).
            for key in (*_TEXTS, *(["source"] if source else [])):
                frame[key] = frame[key].astype("str")
        for key in (*_JSON_LIST, *_JSON_DICT):
            frame[key] = frame[key].astype(object)
        return frame

    def flags_frame(self, task: str | None = None, status: str | None = None, run_id: str | None = None,
                    **filters: Any) -> pd.DataFrame:
        """One row per (result, flag): count how often each model or candidate trips each check with
        `store.flags_frame().groupby(["author", "flag"]).size()`. Results without flags do not appear."""
        frame = self.frame(task, status, run_id, source=False, **filters)
        frame["author"] = frame["metadata"].map(lambda m: m.get("author") if isinstance(m, dict) else None)
        keep = ["id", "run_id", "task", "candidate_id", "candidate_name", "language", "device", "status", "author",
                "flags"]
        out = frame[keep].explode("flags").rename(columns={"flags": "flag"})
        out = out[out["flag"].notna()].reset_index(drop=True)
        out["flag"] = out["flag"].astype(object)
        return out

    def runs(self) -> pd.DataFrame:
        """One row per run id: how many results, how many ok, first and last timestamps."""
        import pandas as pd

        rows = self._read(
            "SELECT run_id, COUNT(*) AS results, SUM(status = 'ok') AS ok, COUNT(DISTINCT task) AS tasks, "
            "MIN(timestamp) AS first, MAX(timestamp) AS last FROM results GROUP BY run_id ORDER BY MIN(id)"
        )
        return pd.DataFrame.from_records(rows, columns=["run_id", "results", "ok", "tasks", "first", "last"])

    def __len__(self) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM results")[0]["n"])

    # ---- lifetime ----------------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            self._db = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.path!r})"
