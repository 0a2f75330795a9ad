"""A/A on the CPU: every KernelBench-format problem in tests/kernelbench/level*, shrunk with fit="cpu", evaluated
with its own reference as a torch candidate through the public API, must be `ok`; and the A/A benchmark's
problem listing, records and summary (benchmarks/kernelbench_aa.py) are checked on a handful of them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.tasks.kernelbench import reference_as_candidate

HERE = Path(__file__).parent
PROBLEMS = sorted(HERE.glob("kernelbench/level*/*.py"))


def _bench():
    spec = importlib.util.spec_from_file_location("kernelbench_aa", HERE.parent / "benchmarks" / "kernelbench_aa.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kernelbench_aa"] = module
    spec.loader.exec_module(module)
    return module


aa = _bench()


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reference_as_its_own_candidate_is_ok(path):
    task = wb.load_kernelbench(path, fit="cpu")
    result = wb.evaluate(task, reference_as_candidate(task), device="cpu", time_it=False)
    assert result.status == "ok", result.message
    assert result.flags == [] and "weak-task" not in result.warnings, result.warnings
    rounds = result.details["rounds"]
    assert len(rounds) >= 5 and all(r["ok"] and r["flags"] == [] for r in rounds)


def test_problem_listing_batches_by_level(tmp_path):
    folder = HERE / "kernelbench"
    everything = aa.problems(folder, [1, 2])
    assert [lv for lv, _ in everything] == [1] * len(list((folder / "level1").glob("*.py"))) + \
        [2] * len(list((folder / "level2").glob("*.py")))
    names = [p.name for _, p in aa.problems(folder, [1], start=0, stop=3)]
    assert names == ["1_Rectangular_matmul_transposed_B.py", "2_Batched_matmul_transposed_A.py",
                     "3_Matrix_vector_product.py"]  # KernelBench's numeric order, not the file system's
    assert len(aa.problems(folder, [1, 2], start=1, stop=3)) == 4 and len(aa.problems(folder, [1, 2], limit=5)) == 5
    with pytest.raises(SystemExit, match="no level7/ folder"):
        aa.problems(folder, [7])
    with pytest.raises(SystemExit, match="extract them first"):
        aa.problems(tmp_path / "nowhere", [1])
    picked = aa.only_ids(everything, "2/6,1/11")
    assert [(lv, p.name) for lv, p in picked] == [(2, "6_Einops_HeadSplit_Softmax.py"),
                                                  (1, "11_Sum_middle_dim_keepdim.py")]
    with pytest.raises(SystemExit, match="no such problem.*1/99"):
        aa.only_ids(everything, "1/99")
    with pytest.raises(SystemExit, match="level/number pairs"):
        aa.only_ids(everything, "one/two")


def test_records_and_summary_of_a_handful_of_problems():
    chosen = aa.problems(HERE / "kernelbench", [1, 2], stop=2)  # two per level
    records = [aa.run_problem(level, path, "cpu", fit="cpu") for level, path in chosen]
    assert [r["status"] for r in records] == ["ok"] * 4
    for r in records:
        assert r["speedup"] is not None and r["speedup"] > 0 and r["seconds"] > 0 and r["flags"] == []
        assert r["kernel_policy"] == ("strict" if r["level"] == 1 else "partial") and r["precision"] == "ieee"
    summary = aa.summarize(records)
    assert summary["total"] == summary["ok"] == 4 and summary["counts"] == {1: {"ok": 2}, 2: {"ok": 2}}
    assert summary["speedup"]["n"] == 4 and summary["speedup"]["p5"] <= summary["speedup"]["median"] <= \
        summary["speedup"]["p95"]
    json.dumps(records)  # what --out writes
    text = aa.format_summary(summary)
    assert "L1" in text and "L2" in text and "ok: 4 of 4" in text and "speedup over 4 timed pairs" in text


def test_summary_numbers_on_constructed_records():
    records = [{"level": 1, "status": "ok", "speedup": s, "flags": []} for s in (0.9, 0.99, 1.0, 1.01, 1.5)]
    records += [{"level": 2, "status": "incorrect", "speedup": None, "flags": ["mismatch"]},
                {"level": 2, "status": "load_error", "speedup": None, "flags": []}]
    s = aa.summarize(records)
    assert s["counts"] == {1: {"ok": 5}, 2: {"incorrect": 1, "load_error": 1}} and s["ok"] == 5 and s["total"] == 7
    assert s["speedup"] == {"n": 5, "median": 1.0, "p5": pytest.approx(0.918), "p95": pytest.approx(1.402),
                            "within_band": pytest.approx(0.6)}
    assert s["flags"] == {"mismatch": 1}
    lines = aa.format_summary(s).splitlines()
    assert lines[0].split() == ["level", "ok", "incorrect", "load_error", "total"]
    assert lines[1].split() == ["L1", "5", "0", "0", "5"] and lines[2].split() == ["L2", "0", "1", "1", "2"]
    assert "within 0.98-1.02: 60%" in aa.format_summary(s)


def test_a_problem_that_cannot_load_is_a_record_not_a_crash(tmp_path):
    bad = tmp_path / "level1" / "1_Broken.py"
    bad.parent.mkdir()
    bad.write_text("this is not python(\n")
    record = aa.run_problem(1, bad, "cpu", fit="cpu")
    assert record["status"] == "load_error" and "syntax error" in record["message"]


def test_extract_copies_the_problem_folder_out_of_a_git_directory(tmp_path):
    repo = tmp_path / "repo"
    (repo / "KernelBench" / "level1").mkdir(parents=True)
    (repo / "KernelBench" / "level1" / "1_Copy.py").write_text(PROBLEMS[0].read_text())
    (repo / "README.md").write_text("not a problem\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "problems"], check=True)
    out = aa.extract(repo / ".git", tmp_path / "dest")
    assert out == tmp_path / "dest" / "KernelBench"
    assert (out / "level1" / "1_Copy.py").read_text() == PROBLEMS[0].read_text()
    assert not (tmp_path / "dest" / "README.md").exists()
    with pytest.raises(SystemExit, match="cannot read KernelBench/"):
        aa.extract(tmp_path / "not-a-repo", tmp_path / "dest2")
    # The one-time setup alone extracts and stops: it does not go on to judge every problem it copied.
    printed = subprocess.run([sys.executable, str(Path(aa.__file__)), "--extract", str(repo / ".git"),
                              "--problems", str(tmp_path / "dest3" / "KernelBench"), "--device", "cpu"],
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert "extracted to" in printed.stdout and "run again without --extract" in printed.stdout
    assert "[1/" not in printed.stdout
