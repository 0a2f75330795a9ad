"""The results store on real SQLite files: round trips, tidy frames, schema guard, concurrent writers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from workbench.errors import StoreError
from workbench.result import Result, Timing
from workbench.store import SCHEMA_VERSION, Store


def _timing(median: float, clock: str = "interpreter") -> Timing:
    return Timing(median_ms=median, min_ms=median * 0.9, max_ms=median * 1.3, iqr_ms=median * 0.1,
                  ci95_low_ms=median * 0.95, ci95_high_ms=median * 1.05, n=7, clock=clock,
                  samples_ms=[median * 0.9, median, median * 1.3])


def _ok(name: str = "fast", task: str = "softmax", median: float = 2.5, **kw) -> Result:
    base = dict(
        task=task, candidate_id=f"id-{name}", candidate_name=name, language="triton", status="ok",
        size={"dim": 256, "batch_size": 64}, dtype="float32", device="cpu", device_name="x86 (interpreter)",
        max_abs_err=3e-7, max_rel_err=1.5e-6, timing=_timing(median), reference_timing=_timing(0.25, "wall"),
        flops=81920.0, bytes=131072.0, source_hash=f"src-{name}", task_hash="t123",
        source=f"# kernel {name}\nimport triton\n", seed=7, versions={"torch": "2.13.0", "triton": "3.9.0"},
        warnings=["interpreter timing is not comparable with compiled code"],
        log="last lines", details={"rounds": [{"max_abs_err": 3e-7}], "heatmap": [[0.0, 1e-7], [2e-7, 0.0]]},
        metadata={"author": "human"},
    )
    base.update(kw)
    return Result(**base)


def _bad(name: str, flags: list[str], author: str, status: str = "rejected") -> Result:
    return Result(task="softmax", candidate_id=f"id-{name}", candidate_name=name, language="torch", status=status,
                  message="\n".join(f"[{f}] ..." for f in flags), flags=flags, size={"batch_size": 64, "dim": 256},
                  source=f"# cheat {name}\n", source_hash=f"src-{name}", metadata={"author": author})


def test_wal_mode_and_schema_version(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        assert store.journal_mode == "wal"
        assert store.schema_version == SCHEMA_VERSION
    with sqlite3.connect(path) as db:  # a second, independent connection sees the persistent WAL mode
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert {"results", "sources", "kwb_schema"} <= {r[0] for r in db.execute("SELECT name FROM sqlite_master")}


def test_result_with_timing_round_trips_exactly(tmp_path):
    store = Store(tmp_path / "r.db")
    original = _ok()
    row = store.add(original, run_id="run-a", prompt_id="p1")
    back = store.get(row)
    assert back == original  # every field, timing samples, details and log included
    assert isinstance(back.timing, Timing) and back.timing.samples_ms == original.timing.samples_ms
    assert back.reference_timing.clock == "wall"
    # A fresh Store on the same file reads the same thing (nothing lived only in memory).
    store.close()
    assert Store(tmp_path / "r.db").get(row) == original
    with pytest.raises(StoreError, match="no row 999"):
        store.get(999)


def test_failed_candidates_are_stored_and_sources_deduplicated(tmp_path):
    store = Store(tmp_path / "r.db")
    bad = _bad("cheat", ["no-custom-kernel"], "model-a")
    ids = store.add_many([bad, bad, _ok()], run_id="r")
    assert len(ids) == len(set(ids)) == 3 and len(store) == 3
    assert store.get(ids[0]).status == "rejected" and store.get(ids[0]).flags == ["no-custom-kernel"]
    assert store.source("src-cheat") == "# cheat cheat\n"
    with sqlite3.connect(tmp_path / "r.db") as db:
        assert db.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2
    # A result without a source hash still gets its text stored, under a hash of the text.
    anon = _ok("anon", source_hash="")
    got = store.get(store.add(anon))
    assert got == anon
    frame = store.frame(candidate_name="anon")
    assert store.source(frame["source_hash"].iloc[0]) == anon.source


def test_frame_columns_dtypes_and_filters(tmp_path):
    store = Store(tmp_path / "r.db")
    store.add(_ok("fast", median=1.0), run_id="r1", author="model-a")
    store.add(_ok("slow", median=4.0), run_id="r1")
    store.add(_bad("cheat", ["torch-compute-in-forward"], "model-b"), run_id="r2", point_id="p3")
    store.add(_ok("other-task", task="layernorm"), run_id="r2")

    frame = store.frame()
    assert len(frame) == 4 and list(frame["id"]) == sorted(frame["id"])
    for col in ("task", "candidate_id", "status", "flags", "size", "device", "time_median_ms", "time_ci95_low_ms",
                "clock", "ref_median_ms", "speedup", "sol_fraction", "source_hash", "versions", "seed", "timestamp",
                "run_id", "point_id", "parent_id", "prompt_id", "metadata", "source"):
        assert col in frame.columns, col
    assert "result_json" not in frame.columns
    assert pd.api.types.is_float_dtype(frame["time_median_ms"]) and pd.api.types.is_float_dtype(frame["sol_fraction"])
    assert pd.api.types.is_integer_dtype(frame["id"]) and pd.api.types.is_integer_dtype(frame["time_n"])
    assert frame["time_median_ms"].tolist()[:2] == [1.0, 4.0] and pd.isna(frame["time_median_ms"].iloc[2])
    # An interpreter time is never stored beside a reference time (older results carried one).
    assert frame["clock"].iloc[0] == "interpreter" and pd.isna(frame["ref_median_ms"].iloc[0])
    assert frame["flags"].iloc[2] == ["torch-compute-in-forward"] and frame["flags"].iloc[0] == []
    assert frame["size"].iloc[0] == {"batch_size": 64, "dim": 256}
    assert frame["versions"].iloc[0]["triton"] == "3.9.0"
    assert frame["metadata"].iloc[0] == {"author": "model-a"}  # add()'s keywords override result.metadata
    assert frame["point_id"].iloc[2] == "p3"

    assert store.frame(task="softmax")["candidate_name"].tolist() == ["fast", "slow", "cheat"]
    assert store.frame(status="ok", run_id="r2")["candidate_name"].tolist() == ["other-task"]
    assert store.frame(status=["rejected", "incorrect"])["candidate_name"].tolist() == ["cheat"]
    assert store.frame(author="model-a")["candidate_name"].tolist() == ["fast"]  # a metadata key
    assert store.frame(size={"dim": 256, "batch_size": 64}).shape[0] == 4  # key order does not matter
    empty = store.frame(task="nope")
    assert len(empty) == 0 and pd.api.types.is_float_dtype(empty["time_median_ms"])
    with pytest.raises(StoreError, match="cannot filter"):
        store.frame(**{"bad key": 1})

    runs = store.runs().set_index("run_id")
    assert runs.loc["r1", "results"] == 2 and runs.loc["r2", "ok"] == 1


def test_flags_frame_counts_cheats_per_model(tmp_path):
    store = Store(tmp_path / "r.db")
    store.add_many([
        _bad("a1", ["no-custom-kernel", "torch-compute-in-forward"], "model-a"),
        _bad("a2", ["torch-compute-in-forward"], "model-a"),
        _bad("b1", ["stale-memory"], "model-b"),
        _bad("b2", ["mismatch"], "model-b", status="incorrect"),
        _ok("clean"),
    ], run_id="study")
    flags = store.flags_frame(run_id="study")
    assert len(flags) == 5 and set(flags.columns) >= {"id", "author", "flag", "status", "task"}
    counts = flags.groupby(["author", "flag"]).size().to_dict()
    assert counts == {("model-a", "no-custom-kernel"): 1, ("model-a", "torch-compute-in-forward"): 2,
                      ("model-b", "stale-memory"): 1, ("model-b", "mismatch"): 1}
    assert store.flags_frame(status="incorrect")["flag"].tolist() == ["mismatch"]
    assert len(store.flags_frame(run_id="elsewhere")) == 0


def test_has_and_delete_run_support_reruns(tmp_path):
    store = Store(tmp_path / "r.db")
    store.add(_ok("fast"), run_id="r1")
    store.add(_bad("cheat", ["stale-memory"], "m"), run_id="r2", point_id="p1")
    store.add(_bad("other", ["mismatch"], "m"), run_id="r2", point_id="p2")
    assert store.has("softmax", "id-fast", {"dim": 256, "batch_size": 64}, "cpu")
    assert store.has("softmax", "id-fast", {"batch_size": 64, "dim": 256}, "cpu", run_id="r1")
    assert not store.has("softmax", "id-fast", {"batch_size": 64, "dim": 256}, "cpu", run_id="r2")
    assert not store.has("softmax", "id-fast", {"batch_size": 64, "dim": 512}, "cpu")
    assert not store.has("softmax", "id-fast", {"batch_size": 64, "dim": 256}, "cuda")
    assert store.delete_point("r2", "p1") == 1 and len(store) == 2
    with pytest.raises(StoreError):
        store.source("src-cheat")  # its only row went, so did its text
    assert store.delete_run("r2") == 1 and store.delete_run("r2") == 0
    assert len(store) == 1 and store.frame()["run_id"].tolist() == ["r1"]


def test_newer_schema_and_foreign_files_are_refused(tmp_path):
    path = tmp_path / "r.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE kwb_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer"):
        Store(path)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE results (x INTEGER)")
    with pytest.raises(StoreError, match="no workbench store wrote"):
        Store(foreign)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store(junk)


_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from workbench.result import Result, Timing
    from workbench.store import Store

    path, writer, rows, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    store = Store(path, timeout=0.0 if writer % 2 else 5.0)  # no busy wait: the retry loop does the work
    Path(f"{go}.ready{writer}").touch()
    while not go.exists():
        time.sleep(0.002)
    ids = []
    for i in range(rows):
        timing = Timing(1.0 + i, 1.0, 2.0, 0.1, 0.9, 1.1, 5, "wall")
        res = Result(task="t", candidate_id=f"w{writer}-{i}", candidate_name=f"w{writer}", language="triton",
                     status="ok" if i % 3 else "rejected", flags=[] if i % 3 else ["stale-memory"],
                     timing=timing, source=f"# shared source {i % 4}\\n", source_hash=f"s{i % 4}")
        if i % 10 == 9:
            ids += store.add_many([res], run_id="conc", writer=writer, i=i)
        else:
            ids.append(store.add(res, run_id="conc", writer=writer, i=i))
        if i % 7 == 0:
            len(store)  # readers interleave with the writers
    assert len(ids) == len(set(ids)) == rows
    print(len(ids), store.retries)
""")


def test_concurrent_writers_lose_nothing(tmp_path):
    path, go = tmp_path / "conc.db", tmp_path / "go"
    writers, rows = 4, 60
    Store(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(w), str(rows), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(writers)]
    deadline = time.time() + 30
    while len(list(tmp_path.glob("go.ready*"))) < writers and time.time() < deadline:
        time.sleep(0.01)
    go.touch()  # release all writers at once for maximal contention
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out.split()[0] == str(rows)

    store = Store(path)
    frame = store.frame(run_id="conc")
    assert len(store) == len(frame) == writers * rows
    pairs = [(m["writer"], m["i"]) for m in frame["metadata"]]
    assert len(set(pairs)) == len(pairs)
    assert set(pairs) == {(w, i) for w in range(writers) for i in range(rows)}
    assert frame["id"].is_unique and frame["candidate_id"].is_unique
    assert (frame["status"] == "rejected").sum() == writers * len(range(0, rows, 3))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 4
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert json.loads(json.dumps(store.runs()["results"].tolist())) == [writers * rows]


def test_a_locked_database_is_retried_not_lost(tmp_path):
    import threading

    path = tmp_path / "r.db"
    store = Store(path, timeout=0.0)  # no SQLite busy wait: only the store's own retry loop can succeed
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock...
    release = threading.Timer(0.3, blocker.execute, args=("COMMIT",))  # ...for 0.3 s
    release.start()
    started = time.perf_counter()
    row = store.add(_ok())
    release.join()
    assert time.perf_counter() - started >= 0.25 and store.retries >= 1
    assert store.get(row).candidate_name == "fast" and len(store) == 1
