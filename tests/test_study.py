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

from workbench.store import Store
from workbench.study import failures
from workbench.study.params import StudyInputError, check_parameters, json_parameter, notebook_parameters
from workbench.study.paths import StudyPathError, data_path
from workbench.study.run import Journal, StudyPoint, expand_grid, load_grid, parse_parameter, plan, run_study

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).parent / "data" / "study_probe.ipynb"
SHOOTOUT = REPO / "studies" / "variant_shootout.ipynb"


def kwb(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWB_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def _short_error(proc: subprocess.CompletedProcess, max_lines: int = 3) -> str:
    """stderr of a refused command: a few lines, no traceback, exit status 2."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert 1 <= len(lines) <= max_lines, proc.stderr
    return proc.stderr


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
           "--run-id", "killed", "-p", "sleep_s", "1", "-p", "device", "cpu"]  # the resume below uses the same values
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
    # The points left run side by side (one kernel each), as `--parallel 2` would.
    resumed = run_study(PROBE, {"sleep_s": 1, "device": "cpu"}, {"value": [1, 2, 3]}, store_path=str(store),
                        out_dir=str(out), run_id="killed", parallel=2, progress=False)
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


# ---- mistakes in what a study run is given -------------------------------------------------------------------

def test_unknown_parameter_is_an_error_with_a_suggestion_and_nothing_runs(tmp_path, kwb_here):
    proc = kwb_here("study", "run", str(SHOOTOUT), "-p", "task_nme", "rmsnorm", "--store", "r.db", "--out",
                    "runs", cwd=tmp_path)
    err = _short_error(proc)
    assert "variant_shootout.ipynb has no parameter 'task_nme'" in err
    assert "did you mean 'task_name'?" in err
    assert "its parameters: task_name, variants, sizes, device, rounds" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r.db").exists()
    # The same check guards the Python API.
    with pytest.raises(StudyInputError, match="did you mean 'task_name'"):
        run_study(SHOOTOUT, {"task_nme": "rmsnorm"}, store_path=str(tmp_path / "r.db"), progress=False)


def test_grid_and_value_mistakes_are_refused_before_any_point(tmp_path, kwb_here):
    def run(*extra):
        return kwb_here("study", "run", str(PROBE), "--store", "r.db", "--out", "runs", *extra, cwd=tmp_path)

    (tmp_path / "typo.yaml").write_text("valeu: [1, 2]\n")
    assert "has no parameter 'valeu' (given by --grid typo.yaml); did you mean 'value'?" in _short_error(
        run("--grid", "typo.yaml"))
    (tmp_path / "broken.yaml").write_text("value: [1, 2\nsleep_s: 0\n")
    err = _short_error(run("--grid", "broken.yaml"))
    assert "grid file broken.yaml is not valid YAML" in err and "line 2" in err
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert "must map parameter names to lists of values" in _short_error(run("--grid", "list.yaml"))
    (tmp_path / "empty.json").write_text('{"value": []}')
    assert "value has an empty list of values" in _short_error(run("--grid", "empty.json"))
    (tmp_path / "bad.json").write_text('{"value": [1,}')
    assert "grid file bad.json is not valid JSON" in _short_error(run("--grid", "bad.json"))
    assert "grid file absent.yaml does not exist" in _short_error(run("--grid", "absent.yaml"))
    assert "parameter value (-p) must be a number like its default 1, not \"abc\"" in _short_error(
        run("-p", "value", "abc"))
    assert "-p store_path: the runner sets store_path for every point; use --store PATH" in _short_error(
        run("-p", "store_path", "other.db"))
    err = _short_error(run("-p", "items", "[a, b"))
    assert "items='[a, b' looks like JSON but does not parse" in err
    (tmp_path / "nb.ipynb").write_bytes(bytes(range(200, 256)))
    assert "is not a Jupyter notebook (not UTF-8 text)" in _short_error(
        kwb_here("study", "run", "nb.ipynb", cwd=tmp_path))
    assert "does not exist" in _short_error(kwb_here("study", "run", "absent.ipynb", cwd=tmp_path))
    (tmp_path / "notes.txt").write_text("not a database\n")
    assert "--store notes.txt is not a results store" in _short_error(
        kwb_here("study", "run", str(PROBE), "--store", "notes.txt", cwd=tmp_path))
    assert "--store notes.txt is not a results store" in _short_error(
        kwb_here("study", "status", "--store", "notes.txt", cwd=tmp_path))
    assert not (tmp_path / "runs").exists()


def test_a_failed_point_shows_the_exception_and_the_failing_line(tmp_path):
    proc = kwb("study", "run", str(PROBE), "-p", "fail", "true", "-p", "value", "7", "--store", "r.db",
               "--out", "runs", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: probe asked to fail at value=7" in proc.stderr
    assert 'raise ValueError(f"probe asked to fail at value={value}")' in proc.stderr
    assert "PapermillExecutionError" not in proc.stderr.split("FAILED", 1)[1]
    (point,) = Journal(tmp_path / "r.db").points(Journal(tmp_path / "r.db").runs()[0]["run_id"])
    assert point["status"] == "failed"
    assert point["error"].splitlines()[0] == "ValueError: probe asked to fail at value=7"
    assert "line 14" in point["error"].splitlines()[1]


def test_json_parameters_arrive_parsed_from_kwb_and_from_plain_papermill(tmp_path):
    store = tmp_path / "r.db"
    proc = kwb("study", "run", str(PROBE), "-p", "items", '["a", "b"]', "--store", str(store), "--out", "runs",
               "--run-id", "kwb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    meta = Store(store).frame(run_id="kwb")["metadata"].iloc[0]
    assert meta["param_items"] == ["a", "b"] and meta["items_type"] == "list"
    assert meta["notebook_dir"] == str(PROBE.parent)

    # Plain papermill from the repository root: no --cwd, the list arrives as text, paths are notebook-relative.
    papermill_cli = Path(sys.executable).with_name("papermill")
    cmd = [str(papermill_cli)] if papermill_cli.exists() else [sys.executable, "-m", "papermill"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWB_")}
    out = subprocess.run([*cmd, str(PROBE.relative_to(REPO)), str(tmp_path / "out.ipynb"), "-p", "items", '["a", "b"]',
                          "-p", "store_path", str(store), "-p", "run_id", "plain", "-p", "value", "2"],
                         cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    meta = Store(store).frame(run_id="plain")["metadata"].iloc[0]
    assert meta["param_items"] == ["a", "b"] and meta["items_type"] == "list"
    assert meta["notebook_dir"] == str(PROBE.parent) and meta["data"] == str(PROBE)


def test_parameter_helpers():
    assert list(notebook_parameters(PROBE))[:5] == ["value", "sleep_s", "fail", "items", "data_file"]
    assert notebook_parameters(SHOOTOUT)["rounds"] == 5
    assert json_parameter("v", '["a", 1]') == ["a", 1] and json_parameter("v", '{"n": 2}') == {"n": 2}
    assert json_parameter("v", "softmax") == "softmax" and json_parameter("v", [1]) == [1]
    with pytest.raises(StudyInputError, match="v='\\[1,' looks like JSON"):
        json_parameter("v", "[1,")
    with pytest.raises(StudyInputError, match="must be true or false"):
        check_parameters(PROBE, ["fail"], {"fail": "yes"})
    check_parameters(PROBE, ["value", "items"], {"value": 3, "items": '["x"]'})
    with pytest.raises(StudyPathError, match="nowhere.txt not found; looked in"):
        data_path("nowhere.txt", PROBE.parent)
    assert data_path("study_probe.ipynb", PROBE.parent) == PROBE


def test_failure_summary_from_an_ipython_traceback():
    tb = ["\x1b[0;31mValueError\x1b[0m   Traceback (most recent call last)",
          "Cell \x1b[0;32mIn[3], line 9\x1b[0m",
          "\x1b[1;32m      8\x1b[0m if fail:",
          "\x1b[0;32m----> 9\x1b[0m     \x1b[38;5;28;01mraise\x1b[39;00m ValueError(\"boom\")",
          "\x1b[0;31mValueError\x1b[0m: boom"]
    text = failures.summary("ValueError", "boom", tb)
    assert text == 'ValueError: boom\n  at Cell In[3], line 9: raise ValueError("boom")'
    marker = failures.MARKER + '{"ename": "KeyError", "evalue": "\'x\'", "traceback": [], "cell": 4}'
    assert failures.from_output("noise\n" + marker, None) == "KeyError: 'x'\n  in code cell 4"


# ---- study reports ---------------------------------------------------------------------------------------------

def _timing(median: float, clock: str, half: float):
    from workbench.result import Timing

    return Timing(median_ms=median, min_ms=median - half, max_ms=median + 2 * half, iqr_ms=half,
                  ci95_low_ms=median - half, ci95_high_ms=median + half, n=50, clock=clock, stop_reason="ci-target")


def _report_store(tmp_path: Path) -> tuple[Path, str]:
    """A run with GPU results (two candidates at two sizes, CIs, the new Result fields), interpreter results
    of the same task, a rejected cheat and one failed point."""
    from workbench.result import Result

    store_path, run_id = tmp_path / "report.db", "rep-1"
    small, large = {"batch_size": 64, "dim": 1024}, {"batch_size": 4096, "dim": 8192}
    gpu = dict(device="cuda", device_name="NVIDIA H100 80GB HBM3", dtype="float32", sandbox="namespaces",
               precision="ieee", kernel_policy="strict", speedup_basis="gpu-only", coverage=0.97,
               versions={"torch": "2.11.0", "triton": "3.6.0", "python": "3.11.9"})
    results = []
    for name, size, t, speedup, ci in [("fused", small, 0.010, 1.52, (1.41, 1.60)),
                                       ("online", small, 0.012, 1.27, (1.20, 1.33)),
                                       ("fused", large, 0.50, 0.98, (0.95, 1.02)),
                                       ("online", large, 0.40, 1.22, (1.18, 1.26))]:
        n = size["batch_size"] * size["dim"]
        results.append(Result(
            task="softmax", candidate_id=name, candidate_name=name, language="triton", status="ok", size=size,
            timing=_timing(t, "cuda-events", t * 0.02), reference_timing=_timing(t * speedup, "cuda-events", t * 0.02),
            speedup=speedup, speedup_ci=ci, speedup_verdict="same" if ci[0] < 1 < ci[1] else "faster",
            flops=5.0 * n, bytes=8.0 * n, sol_fraction=min(1.0, 8.0 * n / 3.35e12 / (t / 1e3)), bound="memory", **gpu))
    results.append(Result(task="softmax", candidate_id="cheat", candidate_name="torch-cheat", language="triton",
                          status="rejected", flags=["torch-forward", "no-kernel-launch"], size=small,
                          message="[torch-forward] forward calls torch.softmax.\nFix: write the kernel.", **gpu))
    results.append(Result(task="softmax", candidate_id="fused", candidate_name="fused", language="triton",
                          status="ok", size={"batch_size": 4, "dim": 64}, device="cpu", device_name="cpu (x86_64)",
                          dtype="float32", timing=_timing(17.0, "interpreter", 3.0), sandbox="none",
                          versions={"torch": "2.13.0", "triton": "3.9.0", "python": "3.11.9"}))
    with Store(store_path) as store:
        for r in results:
            store.add(r, run_id=run_id, point_id="p1")
    journal = Journal(store_path)
    journal.start_run(run_id, str(PROBE), {}, {"value": [1, 2]}, None)
    from workbench.study.run import PointOutcome

    journal.record(run_id, PointOutcome(StudyPoint(str(PROBE), {"value": 1}), "done", "runs/a.ipynb", "", 3.0))
    journal.record(run_id, PointOutcome(StudyPoint(str(PROBE), {"value": 2}), "failed", "runs/b.ipynb",
                                        "ValueError: boom at 2\n  at Cell In[2], line 3: raise ValueError(x)", 1.5))
    return store_path, run_id


def _visible(page: str) -> str:
    """The report without the inlined plotly.js library (whose own source mentions NaN)."""
    import re

    return re.sub(r"<script type='text/javascript'>.*?</script>", "", page, count=1, flags=re.S)


def test_report_is_shareable(tmp_path):
    pytest.importorskip("plotly")
    import re

    from widgets import report_data
    from widgets.report_figures import roofline_sections

    store_path, run_id = _report_store(tmp_path)
    proc = kwb("study", "report", run_id, "--store", str(store_path), "-o", "r.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text()
    shown = _visible(page)
    library = tmp_path / f"plotly-{__import__('plotly').__version__}.min.js"  # beside the report: works offline
    assert library.stat().st_size > 3_000_000 and f"src='{library.name}'" in page and len(page) < 1_000_000
    assert "cdn.plot.ly" not in shown and "http" not in page.split("<body>")[0]
    whole = kwb("study", "report", run_id, "--store", str(store_path), "-o", "one.html", "--self-contained",
                cwd=tmp_path)
    assert whole.returncode == 0 and (tmp_path / "one.html").stat().st_size > 3_000_000
    assert not re.search(r"\bNaN\b|\bnan\b|\bNone\b", shown), re.findall(r".{60}(?:NaN|nan|None).{20}", shown)[:3]
    for header in ("time (ms), median [95% CI]", "speedup (x) [95% CI]", "speed of light (%)", "coverage (%)"):
        assert f"<th>{header}</th>" in shown
    assert "candidate_name" not in re.sub(r"<script.*?</script>", "", shown, flags=re.S)  # no raw field names
    assert "1.52 [1.41, 1.6]" in shown and "faster" in shown and "n/a (interpreter)" in shown
    for text in ("namespaces", "ieee", "strict", "gpu-only", "97.0"):
        assert f"<td>{text}</td>" in shown, text
    # GPU and interpreter times never share a time figure (the lone interpreter point gets none: the tables
    # show it); speedups (GPU only) have CI bands.
    assert "softmax: median time by size (cuda-events)" in shown
    assert "median time by size (interpreter)" not in shown and "median time by size (cuda-events, " not in shown
    assert "softmax: speedup over the eager reference by size" in shown and "fused 95% CI" in shown
    # Every table scrolls inside its own box instead of running off the page.
    assert shown.count("<table") == shown.count("<div class='kwb-scroll'><table") > 4
    # Failed point with its message, the unsandboxed interpreter result called out, flags counted per candidate.
    assert "ValueError: boom at 2" in shown and "at Cell In[2], line 3: raise ValueError(x)" in shown
    assert "1 result(s) ran without a sandbox (sandbox: none)" in shown
    headers, rows = report_data.flag_counts(Store(store_path).frame(run_id=run_id))
    assert headers == ["task", "candidate", "results", "ok", "no-kernel-launch", "torch-forward"]
    assert ["softmax", "torch-cheat", "1", "0", "1", "1"] in rows and ["softmax", "fused", "3", "3", "0", "0"] in rows
    # Provenance: versions of both machines, the device, clocks, and the commit of the study's checkout.
    assert "torch 2.11.0 / 2.13.0" in shown and "cuda: NVIDIA H100 80GB HBM3" in shown
    assert "cuda-events, interpreter" in shown and "ci-target" in shown
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    assert commit and commit in shown

    frame = Store(store_path).frame(run_id=run_id)
    best = report_data.best_per_task_size(frame)
    assert [(b["candidate_name"], b["device"], report_data.size_label(b["size"])) for b in best] == [
        ("fused", "cpu", "batch_size=4, dim=64"), ("fused", "cuda", "batch_size=64, dim=1024"),
        ("online", "cuda", "batch_size=4096, dim=8192")]
    # The roofline holds the four GPU results against the H100's roofs, never the interpreter's point.
    ((title, fig, note),) = roofline_sections(frame)
    assert title == "Roofline: NVIDIA H100 80GB HBM3" and "1 interpreter/CPU result(s) are left out" in note
    points = [t for t in fig.data if t.name == "results"]
    assert len(points) == 1 and len(points[0].x) == 4
    assert any("H100" in (t.name or "") for t in fig.data)


def test_report_without_gpu_results_says_why_there_is_no_roofline(tmp_path):
    pytest.importorskip("plotly")
    from widgets.report import render_report

    store_path = tmp_path / "cpu.db"
    from workbench.result import Result

    with Store(store_path) as store:
        for dim, t in ((64, 17.0), (128, 70.0)):
            store.add(Result(task="softmax", candidate_id="f", candidate_name="fused", language="triton", status="ok",
                             size={"batch_size": 4, "dim": dim}, device="cpu", timing=_timing(t, "interpreter", 2.0)),
                      run_id="cpu-run")
    shown = _visible(render_report(str(store_path), "cpu-run"))
    assert "No roofline: 2 timed result(s) came from the Triton interpreter" in shown
    assert "Every time here comes from the Triton interpreter on a CPU" in shown
    assert "softmax: median time by size (interpreter)" in shown and "speedup over the eager" not in shown
    # Columns equal in every row are said once above the table: reference and speedup n/a (interpreter).
    assert "Every result: device <b>cpu</b> · clock <b>interpreter</b>" in shown
    assert "speedup (x) [95% CI] <b>n/a (interpreter)</b>" in shown and "<th>clock</th>" not in shown.split(
        "<h2>All results</h2>")[1].split("<h2>")[0]
    unknown = kwb("study", "report", "nope", "--store", str(store_path), cwd=tmp_path)
    assert unknown.returncode == 2 and "run 'nope' has no points or results" in unknown.stderr
    assert "runs there: cpu-run" in unknown.stderr and "Traceback" not in unknown.stderr


def test_list_parameters_are_parsed_or_refused_with_the_expected_form(tmp_path):
    """`-p block_sizes notjson` names the form a list takes instead of reaching the notebook as a string."""
    sweep = REPO / "studies" / "block_size_sweep.ipynb"
    err = _short_error(kwb("study", "run", str(sweep), "-p", "block_sizes", "notjson", "--store", "r.db",
                           "--out", "runs", cwd=tmp_path))
    assert ("parameter block_sizes (-p) must be a JSON list like its default [64,128,256], not \"notjson\"; "
            "e.g. -p block_sizes '[64,128,256]'") in err
    (tmp_path / "grid.yaml").write_text("block_sizes: [64, wide]\n")  # a grid value that is not a list either
    assert "parameter block_sizes (--grid grid.yaml) must be a JSON list" in _short_error(
        kwb("study", "run", str(sweep), "--grid", "grid.yaml", "--store", "r.db", cwd=tmp_path))
    check_parameters(sweep, ["block_sizes"], {"block_sizes": "[32, 64]"})  # JSON text of a list is fine
    check_parameters(sweep, ["block_sizes"], {"block_sizes": [32, 64]})
    assert not (tmp_path / "runs").exists() and not (tmp_path / "r.db").exists()


def test_the_printed_report_command_works_with_the_store_and_folder_the_run_used(tmp_path):
    proc = kwb("study", "run", str(PROBE), "-p", "value", "3", "--store", "studies.db", "--out", "out",
               "--run-id", "hint", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    hint = proc.stdout.split("report with `", 1)[1].split("`", 1)[0]
    assert hint == "kwb study report hint --store studies.db --out out", hint
    again = kwb(*hint.split()[1:], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    page = (tmp_path / "out" / "hint" / "report.html").read_text()
    library = next((tmp_path / "out").glob("plotly-*.min.js"))  # once in the results folder, loaded from there
    assert f"src='../{library.name}'" in page and len(page) < 1_000_000
    assert not list(tmp_path.glob("*.html")) and not list((tmp_path / "out" / "hint").glob("plotly-*"))


def _sweep_rows(store_path: Path, run_id: str) -> None:
    """A block-size study's results as its notebook stores them: BLOCK x NUM_WARPS at one size, one failed config,
    the point's grid parameters and each config in the result's metadata."""
    from workbench.result import Result

    point = {"task_name": "softmax", "template": "candidates/softmax/online.py", "size": {"batch_size": 4, "dim": 200}}
    with Store(store_path) as store:
        for block, warps, ms, status in ((64, 1, 60.0, "ok"), (64, 4, None, "incorrect"), (128, 1, 38.0, "ok"),
                                         (128, 4, 15.0, "ok"), (256, 1, 15.5, "ok"), (256, 4, 14.0, "ok")):
            store.add(Result(task="softmax", candidate_id=f"c{block}{warps}", language="triton", status=status,
                             candidate_name=f"online[BLOCK={block},NUM_WARPS={warps}]", device="cpu",
                             size={"batch_size": 4, "dim": 200}, dtype="float32", flops=4000.0, bytes=6400.0,
                             timing=_timing(ms, "interpreter", ms * 0.1) if ms else None,
                             metadata={"config": {"BLOCK": block, "NUM_WARPS": warps}, "parameters": point}),
                      run_id=run_id)


def test_report_figures_follow_what_the_study_swept(tmp_path):
    """Time against BLOCK with a line (and CI band) per NUM_WARPS, and a BLOCK x NUM_WARPS heatmap where the
    failed config keeps its cell; never one "size" category holding every config."""
    pytest.importorskip("plotly")
    from widgets.report_params import swept, task_figures

    store_path = tmp_path / "bs.db"
    _sweep_rows(store_path, "bs")
    rows = __import__("widgets.report_data", fromlist=["records"]).records(Store(store_path).frame(run_id="bs"))
    assert swept([r for r in rows if r["status"] == "ok"]) == ["BLOCK", "NUM_WARPS"]
    lines, heat = task_figures("softmax", rows)
    assert lines.layout.title.text.startswith("softmax: median time by BLOCK (interpreter)")
    medians = [t for t in lines.data if t.mode == "lines+markers"]
    assert [t.name for t in medians] == ["NUM_WARPS=1", "NUM_WARPS=4"]
    assert list(medians[0].x) == [64, 128, 256] and list(medians[1].x) == [128, 256]  # the failed config: no point
    assert list(medians[0].y) == [60.0, 38.0, 15.5] and lines.layout.xaxis.type == "linear"
    bands = [t for t in lines.data if t.fill == "toself"]
    assert len(bands) == 2 and max(bands[0].y) == pytest.approx(66.0)  # 95% CI of BLOCK=64, NUM_WARPS=1
    failed = next(t for t in heat.data if t.name == "failed")
    assert "incorrect" in [c for row in failed.text for c in row]
    assert "fastest correct: BLOCK=256, NUM_WARPS=4" in heat.layout.title.text

    page = render_and_check(store_path, "bs", tmp_path)
    assert "softmax: median time by BLOCK" in page and "median time by size" not in page
    assert "Roofline: projection on H100 SXM" in page and "memory-bound" in page


def render_and_check(store_path: Path, run_id: str, tmp_path: Path) -> str:
    """The report as `kwb study report` writes it: under 1 MB beside one shared plotly.js."""
    proc = kwb("study", "report", run_id, "--store", str(store_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "runs" / run_id / "report.html").read_text()
    assert len(page.encode()) < 1_000_000 and list((tmp_path / "runs").glob("plotly-*.min.js"))
    return page


def test_a_run_that_swept_nothing_gets_one_bar_chart_and_the_projection(tmp_path):
    """The demo: one solution per task, one size each: one "median time per task" bar chart with CI bars."""
    pytest.importorskip("plotly")
    from widgets.report_params import glance_figure, task_figures
    from workbench.result import Result

    store_path = tmp_path / "demo.db"
    with Store(store_path) as store:
        for task, ms in (("softmax", 12.0), ("vector_add", 3.0), ("matmul", 40.0)):
            store.add(Result(task=task, candidate_id=task, candidate_name=f"{task}-solution", language="triton",
                             status="ok", size={"n": 64}, device="cpu", timing=_timing(ms, "interpreter", 1.0),
                             flops=100.0, bytes=800.0), run_id="demo")
    rows = __import__("widgets.report_data", fromlist=["records"]).records(Store(store_path).frame(run_id="demo"))
    assert task_figures("softmax", [r for r in rows if r["task"] == "softmax"]) == []
    bars = glance_figure(rows, "interpreter")
    assert list(bars.data[0].x) == ["matmul", "softmax", "vector_add"] and list(bars.data[0].y) == [40.0, 12.0, 3.0]
    assert list(bars.data[0].error_y.array) == [1.0, 1.0, 1.0]
    page = render_and_check(store_path, "demo", tmp_path)
    assert "Median time per task (interpreter)" in page and "Roofline: projection on H100 SXM" in page
