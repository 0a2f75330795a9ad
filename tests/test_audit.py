"""The audit of published kernels (workbench/audit, docs/audit.md): reading releases and manifests, finding
problems, the survives logic, the report, and real audits of the kernels in tests/data/audit through the engine.

The kernels in tests/data/audit are written for these tests in KernelBench format (their problems are the audit
study's, studies/data/audit/problems): an honest ReLU, one
that lets torch do the work, one that caches its output, one that hides its time on a side stream (a GPU trick;
honest on the CPU), a matmul on TF32-rounded operands (right only under a TF32 policy), a constant on a degenerate
problem (softmax over a dimension of size 1), and an honest one whose class is still named Model.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.audit import (
    AuditEntry,
    AuditInputError,
    ProblemIndex,
    ProblemNotFound,
    ReleaseFields,
    judge_claim,
    read_release,
    run_audit,
)
from workbench.audit.release import problem_in_name
from workbench.audit.report import render_report
from workbench.audit.table import audit_frame, audit_row
from workbench.result import Result, Timing

DATA = Path(__file__).parent / "data" / "audit"
RELEASE, MANIFEST = DATA / "release", DATA / "manifest.csv"
PROBLEMS = Path(__file__).resolve().parents[1] / "studies" / "data" / "audit" / "problems"
ROOT = Path(__file__).resolve().parents[1]


def _result(status: str = "ok", *, speedup: float | None = None, ci: tuple[float, float] | None = None,
            verdict: str | None = None, flags: list[str] | None = None, warnings: list[str] | None = None,
            message: str = "", clock: str = "cuda-events") -> Result:
    timing = Timing(1.0, 0.9, 1.1, 0.1, 0.95, 1.05, 30, clock)
    return Result(task="t", candidate_id="c", candidate_name="k", language="triton", status=status, message=message,
                  flags=flags or [], warnings=warnings or [], timing=timing if status == "ok" else None,
                  speedup=speedup, speedup_ci=ci, speedup_verdict=verdict, device="cuda")


# ---- release adapters ---------------------------------------------------------------------------------------------

def test_a_folder_of_kernels_names_each_problem_in_its_file_name_and_renames_model():
    entries = {e.key: e for e in read_release(RELEASE)}
    assert len(entries) == 7
    assert (entries["level1_2_matmul_tf32.py"].level, entries["level1_2_matmul_tf32.py"].problem_id) == (1, 2)
    renamed = entries["level1_1_relu_model_named.py"]
    assert renamed.notes == ("class Model renamed ModelNew",)
    assert "class ModelNew(nn.Module)" in renamed.code and "super(ModelNew, self)" in renamed.code
    assert "class Model" not in renamed.code.replace("class ModelNew", "")
    assert all(e.claimed_speedup is None and e.precision is None for e in entries.values())


@pytest.mark.parametrize("name, expected", [
    ("level1_19_ReLU.py", (1, 19)), ("level_2_problem_7_sample_0_kernel.py", (2, 7)), ("L3_12.py", (3, 12)),
    ("level3/12_Gemm.py", (3, 12)), ("kernel.py", (None, None)), ("run_level1_19.py", (1, 19)),
])
def test_the_problem_a_file_name_gives(name, expected):
    assert problem_in_name(name) == expected


def test_problem_files_and_helpers_in_a_checkout_are_not_taken_for_kernels(tmp_path):
    shutil.copytree(PROBLEMS / "level1", tmp_path / "level1")
    (tmp_path / "helper.py").write_text("def f():\n    return 1\n")
    (tmp_path / "level1" / "19_relu_solution.py").write_text((RELEASE / "level1_1_relu_honest.py").read_text())
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "level1_1_x.py").write_text((RELEASE / "level1_1_relu_honest.py").read_text())
    assert [(e.key, e.level, e.problem_id) for e in read_release(tmp_path)] == [("level1/19_relu_solution.py", 1, 19)]


def _json_release(tmp_path: Path, records, wrap: str | None = None) -> Path:
    path = tmp_path / "release.json"
    path.write_text(json.dumps({wrap: records} if wrap else records))
    return path


def test_a_json_release_with_the_default_field_names(tmp_path):
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    path = _json_release(tmp_path, [{"code": code, "level": 1, "problem_id": 1, "speedup": "2.1x", "model": "m1"},
                                    {"kernel": code, "problem": "1_ReLU_rows", "claimed_speedup": 0.9,
                                     "precision": "TF32"}], wrap="kernels")
    first, second = read_release(path)
    assert (first.key, first.level, first.problem_id, first.claimed_speedup, first.source) == \
        ("release.json#0", 1, 1, 2.1, "m1")
    assert (second.problem, second.claimed_speedup, second.precision) == ("1_ReLU_rows", 0.9, "tf32")


def test_a_json_release_with_its_own_field_names(tmp_path):
    code = (RELEASE / "level1_1_relu_model_named.py").read_text()
    path = _json_release(tmp_path, [{"impl": code, "task_name": "level1/1_ReLU_rows.py", "reported": 3}])
    with pytest.raises(AuditInputError, match="no kernels found.*--field code=NAME"):
        read_release(path)
    names = ReleaseFields.parse(["code=impl", "problem=task_name", "claimed_speedup=reported"])
    (entry,) = read_release(path, names=names)
    assert (entry.problem, entry.claimed_speedup, entry.notes) == ("level1/1_ReLU_rows.py", 3.0,
                                                                  ("class Model renamed ModelNew",))
    with pytest.raises(AuditInputError, match="FIELD one of code, problem"):
        ReleaseFields.parse(["kernel=impl"])


def test_a_json_release_with_broken_records_lists_each(tmp_path):
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    path = _json_release(tmp_path, [{"code": code, "speedup": "fast"}, {"name": "no code"},
                                    {"code": code, "level": 0, "problem_id": 1}])
    with pytest.raises(AuditInputError) as err:
        read_release(path)
    text = str(err.value)
    assert "nothing was run" in text
    assert "release.json record 0: 'fast' is not a speedup; write a number such as 1.8 or 1.8x" in text
    assert "release.json record 1: has no code" in text and "--field code=NAME" in text
    assert "release.json record 2: level 0 must be 1 or more" in text


def test_a_json_lines_release_with_level_id_and_score_fields(tmp_path):
    """One record per line, the level under `level_id` and the claim under `score_default` (as releases of
    model-written CUDA kernels ship them), a blank line between; a line that is not JSON is named by its number."""
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    records = [{"level_id": "1", "task_id": "1", "custom_code": code, "score_default": "2.75"},
               {"level_id": "1", "task_id": "1", "custom_code": code, "score_default": "0.9"}]
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(records[0]) + "\n\n" + json.dumps(records[1]) + "\n")
    first, second = read_release(path)
    assert (first.key, first.level, first.problem_id, first.claimed_speedup) == ("h100.json#0", 1, 1, 2.75)
    assert (second.key, second.claimed_speedup) == ("h100.json#1", 0.9)
    path.write_text(json.dumps(records[0]) + "\n" + json.dumps({**records[1], "custom_code": ""}) + "\n")
    with pytest.warns(UserWarning, match="h100.json: 1 records have an empty code field .* not audited: records 1"):
        assert [e.key for e in read_release(path)] == ["h100.json#0"]
    path.write_text(json.dumps(records[0]) + "\n{broken\n")
    with pytest.raises(AuditInputError, match=r"h100.json: neither JSON nor JSON Lines \(line 2: "):
        read_release(path)


# ---- manifests ----------------------------------------------------------------------------------------------------

def test_a_manifest_gives_claims_precisions_and_sources():
    entries = {e.key: e for e in read_release(RELEASE, MANIFEST)}
    assert len(entries) == 7
    assert entries["level1_1_relu_honest.py"].claimed_speedup == 1.05
    assert (entries["level1_2_matmul_tf32.py"].precision, entries["level1_2_matmul_tf32.py"].claimed_speedup) == \
        ("tf32", 2.5)
    assert {e.source for e in entries.values()} == {"hand-written"}
    assert entries["level1_3_softmax_constant.py"].level == 1 and entries["level1_3_softmax_constant.py"].problem_id == 3


def test_a_json_manifest_names_problems_for_files_whose_names_do_not(tmp_path):
    shutil.copy(RELEASE / "level1_1_relu_honest.py", tmp_path / "mine.py")
    manifest = tmp_path / "claims.json"
    manifest.write_text(json.dumps([{"file": "mine.py", "level": "level1", "problem_id": "1", "speedup": 1.4}]))
    (entry,) = read_release(tmp_path, manifest)
    assert (entry.key, entry.level, entry.problem_id, entry.claimed_speedup) == ("mine.py", 1, 1, 1.4)


def test_a_bad_manifest_names_every_mistake_with_its_line_and_runs_nothing(tmp_path):
    manifest = tmp_path / "m.csv"
    manifest.write_text("file,claimed_speedup,precision\nlevel1_1_relu_honest.py,fast,\nmissing.py,2,\n"
                        "level1_2_matmul_tf32.py,2,tf16\nlevel1_1_relu_honest.py,1,\n,1,\n")
    with pytest.raises(AuditInputError) as err:
        read_release(RELEASE, manifest)
    lines = str(err.value).splitlines()
    assert lines[0] == f"manifest {manifest} cannot be used as it is (nothing was run):"
    assert lines[1:] == [
        "  m.csv line 2: 'fast' is not a speedup; write a number such as 1.8 or 1.8x",
        f"  m.csv line 3: kernel file 'missing.py' not found in {RELEASE}",
        "  m.csv line 4: precision 'tf16' is unknown; use one of conv-tf32, fast, ieee, reduced-reductions, "
        "tf32, torch-default",
        "  m.csv line 5: level1_1_relu_honest.py is listed twice; list each kernel once",
        "  m.csv line 6: no file named"]
    manifest.write_text("kernel,speedup\na.py,2\n")
    with pytest.raises(AuditInputError, match=r"has no `file` column \(its columns: kernel, speedup\)"):
        read_release(RELEASE, manifest)
    with pytest.raises(AuditInputError, match="does not exist"):
        read_release(RELEASE, tmp_path / "none.csv")


# ---- problems -----------------------------------------------------------------------------------------------------

def test_problems_are_found_by_level_and_id_by_name_and_by_path():
    index = ProblemIndex([PROBLEMS])
    assert len(index) == 3
    assert index.resolve(AuditEntry("k", "", level=1, problem_id=2)).name == "2_Square_matmul.py"
    assert index.resolve(AuditEntry("k", "", problem="3_Softmax_single_column")).name == "3_Softmax_single_column.py"
    assert index.resolve(AuditEntry("k", "", problem="level1/1_ReLU_rows.py")).name == "1_ReLU_rows.py"


def test_a_missing_problem_says_what_was_looked_for_and_what_to_give():
    index = ProblemIndex([PROBLEMS])
    with pytest.raises(ProblemNotFound, match=r"no problem level 1 id 9 under .*problems \(level 1 has ids 1\.\.3\)"):
        index.resolve(AuditEntry("k", "", level=1, problem_id=9))
    with pytest.raises(ProblemNotFound, match=r"no level2 folder"):
        index.resolve(AuditEntry("k", "", level=2, problem_id=1))
    with pytest.raises(ProblemNotFound, match="'19_ReLU' not found under .*its name as the checkout spells it"):
        index.resolve(AuditEntry("k", "", problem="19_ReLU"))
    with pytest.raises(ProblemNotFound, match=r"names no problem: put level and id in the file name"):
        index.resolve(AuditEntry("k", ""))
    with pytest.raises(ProblemNotFound, match=r"give --problems KERNELBENCH_CHECKOUT"):
        ProblemIndex([]).resolve(AuditEntry("k", "", level=1, problem_id=1))


# ---- survives -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("claimed, precision, at_claim, at_ieee, survives, why", [
    (2.0, "ieee", None, None, "n/a", "not evaluated: no problem"),
    (2.0, "ieee", _result("rejected", flags=["module-cache"]), None, "no", "rejected [module-cache]"),
    (2.0, "ieee", _result("incorrect", flags=["mismatch"], message="x; the errors match TF32 rounding of the inputs"),
     None, "no", "incorrect [mismatch]: its errors match TF32 rounding (a precision-only win)"),
    (2.0, "ieee", _result("compile_error"), None, "no", "compile error"),
    (2.0, "ieee", _result(speedup=3.0, ci=(2.9, 3.1), verdict="faster", warnings=["weak-task"]), None, "no",
     "weak-task: the problem cannot tell right from wrong"),
    (2.0, "tf32", _result(speedup=2.2, ci=(2.1, 2.3), verdict="faster"), _result("incorrect", flags=["mismatch"]),
     "no", "precision-only win: correct under tf32, incorrect [mismatch] under ieee"),
    (2.0, "ieee", _result(clock="interpreter"), None, "n/a", "correct; speed not compared on Triton's CPU interpreter"),
    (2.0, "ieee", _result(speedup=1.5, ci=(1.4, 1.6), verdict="faster"), None, "no",
     "slower than claimed beyond CI: claimed 2.00x, measured 1.50x [1.40, 1.60]"),
    (1.2, "ieee", _result(speedup=1.1, ci=(0.7, 1.9), verdict="inconclusive"), None, "n/a", "inconclusive: measured"),
    (None, "ieee", _result(speedup=1.0, ci=(0.99, 1.01), verdict="same"), None, "no", "not faster: measured 1.00x"),
    (None, "ieee", _result(speedup=1.3, ci=(1.25, 1.35), verdict="faster"), None, "yes", "faster: measured 1.30x"),
    (1.5, "ieee", _result(speedup=1.45, ci=(1.4, 1.55), verdict="faster"), None, "yes",
     "measured 1.45x [1.40, 1.55] covers or beats the claimed 1.50x"),
    (1.02, "ieee", _result(speedup=1.0, ci=(0.98, 1.03), verdict="same"), None, "yes",
     "measured 1.00x [0.98, 1.03] covers or beats the claimed 1.02x"),
    (2.0, "tf32", _result(speedup=4.0, ci=(3.9, 4.1), verdict="faster"),
     _result(speedup=4.5, ci=(4.4, 4.6), verdict="faster"), "yes", "measured 4.00x [3.90, 4.10] covers"),
])
def test_survives_and_why(claimed, precision, at_claim, at_ieee, survives, why):
    verdict = judge_claim(claimed, precision, at_claim, at_ieee if at_ieee is not None else at_claim,
                          error="no problem")
    assert (verdict.survives, verdict.why[:len(why)]) == (survives, why)


# ---- the report ---------------------------------------------------------------------------------------------------

def test_the_report_is_one_small_page_with_both_figures_and_every_row():
    rows = []
    for i in range(600):
        measured = _result(speedup=1.0 + i % 7, ci=(0.9 + i % 7, 1.1 + i % 7), verdict="faster")
        entry = AuditEntry(f"level1_{i % 90 + 1}_k{i}.py", "", level=1, problem_id=i % 90 + 1,
                           claimed_speedup=1.5 + i % 5, source="paper")
        rows.append(audit_row(entry, f"{i % 90 + 1}_P", "ieee", measured, measured))
    frame = audit_frame(rows)
    html = render_report(frame)
    assert len(html.encode()) < 1_000_000
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    assert html.count("<svg") == 2 and html.count("<circle") == 600 and "stroke-dasharray" in html
    assert html.count("<tr>") == 601
    # A claim survives where the CI's upper end (1.1 + i % 7) reaches it (1.5 + i % 5).
    beaten = sum(1.1 + i % 7 >= 1.5 + i % 5 for i in range(600))
    assert frame["survives"].value_counts().to_dict() == {"yes": beaten, "no": 600 - beaten}


# ---- real audits ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """The test release audited on the CPU through the real engine, with its manifest."""
    out = tmp_path_factory.mktemp("audit") / "out"
    return run_audit(RELEASE, manifest=MANIFEST, problems=[PROBLEMS], out=out, device="cpu", progress=False)


def test_a_real_audit_says_which_claims_survive_and_why(audited):
    frame = audited.frame.set_index("kernel")
    assert audited.evaluated == 8 and audited.reused == 0  # the TF32 claim is evaluated twice
    got = {k: (r["status"], r["flags"], r["status_ieee"], r["survives"], r["why"].split(":")[0].split(" [")[0])
           for k, r in frame.iterrows()}
    assert got == {
        "level1_1_relu_honest.py": ("ok", "", "ok", "n/a", "correct; speed not compared on Triton's CPU interpreter"),
        "level1_1_relu_calls_torch.py": ("rejected", "decoy-kernel,torch-compute-in-forward", "rejected", "no",
                                         "rejected"),
        "level1_1_relu_cached_output.py": ("rejected", "module-cache", "rejected", "no", "rejected"),
        "level1_1_relu_side_stream.py": ("ok", "", "ok", "n/a", "correct; speed not compared on Triton's CPU interpreter"),
        "level1_2_matmul_tf32.py": ("ok", "", "incorrect", "no", "precision-only win"),
        "level1_3_softmax_constant.py": ("ok", "", "ok", "no", "weak-task"),
        "level1_1_relu_model_named.py": ("ok", "", "ok", "n/a", "correct; speed not compared on Triton's CPU interpreter"),
    }
    assert frame.loc["level1_1_relu_side_stream.py", "warnings"] == "stream-use"
    assert frame.loc["level1_3_softmax_constant.py", "warnings"] == "weak-task"
    assert frame.loc["level1_1_relu_model_named.py", "notes"] == "class Model renamed ModelNew"
    assert set(frame["clock"].dropna()) == {"interpreter"} and frame["speedup"].isna().all()
    assert list(frame["claimed_speedup"]) == [1.05, 3.0, 40.0, 8.0, 2.5, 5.0, 1.0]
    assert frame.loc["level1_2_matmul_tf32.py", "claim_precision"] == "tf32"


def test_a_real_audit_writes_its_table_and_report(audited):
    import pandas as pd

    csv = pd.read_csv(audited.csv)
    assert list(csv["survives"].fillna("n/a")) == list(audited.frame["survives"])
    html = audited.html.read_text()
    assert audited.html.stat().st_size < 1_000_000 and "<script" not in html
    assert "Timed on Triton's CPU interpreter" in html and "level1_2_matmul_tf32.py" in html
    with sqlite3.connect(audited.out_dir / "audit.db") as db:
        assert db.execute("SELECT COUNT(*) FROM results WHERE run_id='audit'").fetchone()[0] == 8
        assert db.execute("SELECT COUNT(*) FROM study_runs WHERE run_id='audit'").fetchone()[0] == 1


def test_a_rerun_resumes_and_evaluates_only_what_was_not_finished(audited):
    with pytest.raises(AuditInputError, match="already holds an audit \\(8 evaluations\\); pass --resume"):
        run_audit(RELEASE, manifest=MANIFEST, problems=[PROBLEMS], out=audited.out_dir, device="cpu", progress=False)
    again = run_audit(RELEASE, manifest=MANIFEST, problems=[PROBLEMS], out=audited.out_dir, device="cpu",
                      progress=False, resume=True)
    assert (again.evaluated, again.reused) == (0, 8)
    assert again.frame.drop(columns=["message"]).equals(audited.frame.drop(columns=["message"]))
    with sqlite3.connect(audited.out_dir / "audit.db") as db:  # a kill before the last evaluation was stored
        db.execute("DELETE FROM results WHERE id = (SELECT MAX(id) FROM results)")
    resumed = run_audit(RELEASE, manifest=MANIFEST, problems=[PROBLEMS], out=audited.out_dir, device="cpu",
                        progress=False, resume=True)
    assert (resumed.evaluated, resumed.reused) == (1, 7)
    assert list(resumed.frame["survives"]) == list(audited.frame["survives"])


def test_a_json_release_and_a_missing_problem_in_one_audit(tmp_path, audited):
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    release = _json_release(tmp_path, [{"code": code, "problem": "1_ReLU_rows", "speedup": 1.2},
                                       {"code": code, "level": 1, "problem_id": 7, "speedup": 9}])
    audit = run_audit(release, problems=[PROBLEMS], out=tmp_path / "out", device="cpu", progress=False)
    first, second = audit.frame.to_dict("records")
    assert (first["kernel"], first["problem"], first["status"], first["claimed_speedup"]) == \
        ("release.json#0", "1_ReLU_rows", "ok", 1.2)
    assert (second["status"], second["survives"]) == ("not-evaluated", "n/a")
    assert second["why"].startswith("not evaluated: no problem level 1 id 7 under")
    assert audit.evaluated == 1


def test_a_release_that_ships_its_reference_is_judged_against_it_and_a_difference_is_noted(tmp_path):
    """The reference a record ships is the problem its claim was measured on; where the problem folder's copy of the
    same level and id differs, the row says so (a release's sizes or task may not be the checkout's)."""
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    ours = (PROBLEMS / "level1" / "1_ReLU_rows.py").read_text()
    release = _json_release(tmp_path, [{"code": code, "level_id": 1, "task_id": 1, "ref_code": ours},
                                       {"code": code, "level_id": 1, "task_id": 1, "ref_code": ours + "\n# v2\n"},
                                       {"code": code, "level_id": 1, "task_id": 9, "ref_code": "x = 1\n"}])
    with pytest.raises(AuditInputError, match="record 2: its reference is not a KernelBench problem"):
        run_audit(release, problems=[PROBLEMS], out=tmp_path / "out", device="cpu", progress=False)
    release = _json_release(tmp_path, json.loads(release.read_text())[:2])
    audit = run_audit(release, problems=[PROBLEMS], out=tmp_path / "out", device="cpu", progress=False)
    same, edited = audit.frame.to_dict("records")
    assert (same["problem"], same["status"], same["notes"]) == \
        ("1_ReLU_rows", "ok", "reference as the release ships it")
    assert (edited["problem"], edited["status"]) == ("1_ReLU_rows", "ok")
    assert edited["notes"] == "reference as the release ships it; it differs from 1_ReLU_rows.py of the problem folder"
    assert len(list((tmp_path / "out" / "references" / "level1").glob("1_*.py"))) == 2


def _kwb(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


def test_kwb_audit_prints_the_table_and_resumes(audited):
    proc = _kwb("audit", str(RELEASE), "--manifest", str(MANIFEST), "--problems", str(PROBLEMS), "--out",
                str(audited.out_dir), "--device", "cpu", "--resume", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "7 kernels: 0 survive, 4 do not, 3 n/a" in proc.stdout
    assert "0 evaluations run, 8 taken from the earlier run" in proc.stdout
    assert "level1_2_matmul_tf32.py" in proc.stdout and "precision-only win" in proc.stdout


def test_kwb_audit_refuses_what_it_cannot_use_in_a_line_or_two(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("file,claimed_speedup\nnot_there.py,2\n")
    for args, expected in [
        ((str(tmp_path / "none"),), "does not exist; give the folder"),
        ((str(RELEASE), "--problems", str(tmp_path / "none")), "--problems"),
        ((str(RELEASE), "--field", "kernel=impl"), "FIELD one of code"),
        ((str(RELEASE), "--manifest", str(bad)), "line 2: kernel file 'not_there.py' not found"),
        ((str(RELEASE), "--precision", "tf16"), "invalid choice: 'tf16'"),
    ]:
        proc = _kwb("audit", *args, "--out", str(tmp_path / "out"), "--device", "cpu")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out" / "audit.db").exists()


def test_the_audit_benchmark_samples_a_large_release_largest_claims_first(tmp_path):
    """benchmarks/audit_published.py --largest K --sample N --seed S: the K largest claims, then N of the rest at
    random (the same N for the same seed), written as a release the audit reads back with claims and references."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("audit_published", ROOT / "benchmarks" / "audit_published.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    code = (RELEASE / "level1_1_relu_honest.py").read_text()
    ours = (PROBLEMS / "level1" / "1_ReLU_rows.py").read_text()
    release = tmp_path / "big.jsonl"
    release.write_text("".join(json.dumps({"level_id": 1, "task_id": i, "custom_code": code, "score_default": s,
                                           "ref_code": ours}) + "\n" for i, s in enumerate([1.1, 9.0, 2.0, 0.5, 3.0], 1)))
    first = bench._sample(release, tmp_path / "a", largest=2, count=2, seed=0)
    again = bench._sample(release, tmp_path / "b", largest=2, count=2, seed=0)
    picked = read_release(first)
    assert [e.claimed_speedup for e in picked[:2]] == [9.0, 3.0]
    assert len(picked) == 4 and len({e.problem_id for e in picked}) == 4
    assert [e.problem_id for e in picked] == [e.problem_id for e in read_release(again)]
    assert all(e.reference == ours and e.code == code for e in picked)
