"""The study runner: grids, papermill execution, resume after SIGKILL, local parallelism and Dask."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.study.run import Journal, StudyPoint, expand_grid, load_grid, parse_parameter, plan, run_study

PROBE = Path(__file__).parent / "data" / "study_probe.ipynb"


def _stored(store: Path, run_id: str) -> list[str]:
    with sqlite3.connect(store) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        table = "results" if "results" in tables else sorted(t for t in tables if not t.startswith("study_"))[0]
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        rows = db.execute(f"SELECT candidate_name FROM {table} WHERE run_id=?", (run_id,)).fetchall()
    assert "run_id" in cols
    return sorted(r[0] for r in rows)


def test_expand_grid_is_a_cartesian_product_over_base_values():
    points = expand_grid({"task": "softmax", "block": 64}, {"block": [64, 128], "warps": [2, 4, 8]})
    assert len(points) == 6
    assert {p["task"] for p in points} == {"softmax"}
    assert {(p["block"], p["warps"]) for p in points} == {(b, w) for b in (64, 128) for w in (2, 4, 8)}
    assert expand_grid({"a": 1}, None) == [{"a": 1}]


def test_grid_file_and_parameter_parsing(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("block: [64, 128]\nmodel: [a, b]\n")
    assert load_grid(grid) == {"block": [64, 128], "model": ["a", "b"]}
    assert parse_parameter("64") == 64 and parse_parameter("[1, 2]") == [1, 2]
    assert parse_parameter("softmax") == "softmax" and parse_parameter("true") is True


def test_point_ids_are_stable_and_ignore_runner_parameters():
    a = plan("nb.ipynb", {"x": 1}, {"y": [1, 2]}, store_path="a.db", run_id="r1")
    b = plan("nb.ipynb", {"x": 1}, {"y": [1, 2]}, store_path="b.db", run_id="r2")
    assert [p.id for p in a] == [p.id for p in b]
    assert len({p.id for p in a}) == 2
    assert a[0].papermill_parameters()["point_id"] == a[0].id
    assert StudyPoint("nb.ipynb", {"x": 1}).id != StudyPoint("nb.ipynb", {"x": 2}).id


def test_run_study_executes_every_point_in_parallel_and_rerun_skips_them(tmp_path):
    store, out = tmp_path / "r.db", tmp_path / "runs"
    run = run_study(PROBE, {"device": "cpu"}, {"value": [1, 2, 3]}, store_path=str(store), out_dir=str(out),
                    parallel=2, progress=False)
    assert [o.status for o in run.outcomes].count("done") == 3, [o.error for o in run.outcomes]
    assert _stored(store, run.run_id) == ["probe-1", "probe-2", "probe-3"]
    executed = sorted(Path(run.out_dir).glob("*.ipynb"))
    assert len(executed) == 3
    nb = json.loads(executed[0].read_text())
    assert "papermill" in nb["metadata"] and "widgets" not in nb["metadata"]
    again = run_study(PROBE, {"device": "cpu"}, {"value": [1, 2, 3]}, store_path=str(store), out_dir=str(out),
                      run_id=run.run_id, progress=False)
    assert [o.status for o in again.outcomes] == ["skipped"] * 3
    assert _stored(store, run.run_id) == ["probe-1", "probe-2", "probe-3"]


def test_a_failing_point_is_reported_with_the_notebooks_error_and_kept(tmp_path):
    store = tmp_path / "r.db"
    run = run_study(PROBE, {"fail": True}, store_path=str(store), out_dir=str(tmp_path / "runs"), progress=False)
    (outcome,) = run.outcomes
    assert outcome.status == "failed"
    assert "probe asked to fail" in outcome.error
    assert Path(outcome.output).exists(), "a failed run's notebook is still written out"
    assert Journal(store).points(run.run_id)[0]["status"] == "failed"


def test_sigkill_mid_study_loses_no_completed_point(tmp_path):
    store, out = tmp_path / "r.db", tmp_path / "runs"
    cmd = [sys.executable, "-m", "workbench.cli.main", "study", "run", str(PROBE), "--store", str(store), "--out", str(out),
           "--run-id", "killed", "-p", "sleep_s", "4", "-p", "device", "cpu"]  # the resume below uses the same values
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"value": [1, 2, 3]}))
    proc = subprocess.Popen([*cmd, "--grid", str(grid)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 240
    while time.time() < deadline:
        if store.exists() and len(Journal(store).done_points("killed")) >= 1:
            break
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = Journal(store).done_points("killed")
    assert 1 <= len(done_before) < 3
    resumed = run_study(PROBE, {"sleep_s": 4, "device": "cpu"}, {"value": [1, 2, 3]}, store_path=str(store),
                        out_dir=str(out), run_id="killed", progress=False)
    statuses = sorted(o.status for o in resumed.outcomes)
    # Points finished before the kill are skipped, the rest run now: every point ends done exactly once.
    assert statuses.count("failed") == 0
    assert len(Journal(store).done_points("killed")) == 3
    assert sorted(set(_stored(store, "killed"))) == ["probe-1", "probe-2", "probe-3"]


def test_points_run_on_a_real_local_dask_cluster(tmp_path):
    pytest.importorskip("distributed")
    store = tmp_path / "r.db"
    run = run_study(PROBE, {"device": "cpu"}, {"value": [5, 6]}, store_path=str(store), out_dir=str(tmp_path / "runs"),
                    cluster="local:2", progress=False)
    assert sorted(o.status for o in run.outcomes) == ["done", "done"], [o.error for o in run.outcomes]
    assert _stored(store, run.run_id) == ["probe-5", "probe-6"]
