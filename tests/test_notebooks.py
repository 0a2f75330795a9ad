"""Tutorials and studies run top to bottom headlessly (papermill), on the CPU interpreter in CI.

Tutorials ship their exercises unsolved: run as shipped, every auto-check says "not solved yet" and the run
still completes; with worked solutions injected through papermill parameters (`exerciseN_solution`), every
auto-check says "solved". Studies run with plain `papermill` from the repository root, the way a user would
type it, with list parameters given as JSON text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDIES = sorted((ROOT / "studies").glob("*.ipynb"))
SOLUTIONS = Path(__file__).parent / "data" / "tutorial_solutions"
#: Auto-checked exercises per tutorial.
EXERCISES = {"01_first_kernel": 1, "02_fusion_softmax": 1, "03_reductions_layernorm": 1, "04_tiling_matmul": 1,
             "05_roofline": 1, "06_cheating_kernels": 1, "07_prompting_an_llm": 2, "08_flash_attention": 2}
VERDICT = re.compile(r"^exercise (\d+): (solved|not solved yet) - (.*)$", re.M)


def _execute(path: Path, out_dir: Path, km, **parameters) -> tuple[dict, float]:
    """Run `path` with papermill in the kernel of `km` (started here if it has none, left running), in the
    tutorials' folder (their relative paths)."""
    out = out_dir / path.name
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    papermill.execute_notebook(str(path), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(ROOT / "notebooks"), progress_bar=False, store_widget_state=False, km=km)
    return json.loads(out.read_text()), time.perf_counter() - started


def _shutdown(km) -> None:
    from jupyter_core.utils import run_sync

    if km.has_kernel:
        run_sync(km.shutdown_kernel)(now=True)


def _from_first_exercise(path: Path, folder: Path) -> Path:
    """What a student re-runs once an exercise is solved: the tutorial from the first cell that reads a solution to
    the end, after a `parameters` cell holding only the exercise parameters (so the cells before, and `device`,
    stay as the as-shipped run left them)."""
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    tagged = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    first = next(i for i, c in enumerate(cells) if i > tagged and c["cell_type"] == "code"
                 and re.search(r"exercise\d+_solution is not None", "".join(c["source"])))
    names = re.findall(r"^(exercise\d+_solution) = None", "".join(cells[tagged]["source"]), re.M)
    parameters = {**cells[tagged], "source": [f"{name} = None\n" for name in names], "outputs": []}
    nb["cells"] = [parameters, *cells[first:]]
    out = folder / path.name
    folder.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(nb))
    return out


def _stdout(nb: dict) -> str:
    return "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def _solutions(stem: str) -> dict:
    """The worked solutions a student would have written, as papermill parameters."""
    import workbench as wb

    if stem == "04_tiling_matmul":
        return {"exercise1_solution": {**wb.get_task("matmul").size(None, "cpu"), "dtype": "float16"}}
    if stem == "05_roofline":
        from roofline.specs import get_spec

        task = wb.get_task("softmax")
        return {"exercise1_solution": 1e3 * task.bytes(task.size("gpu")) / get_spec("H100 SXM").memory_bandwidth}
    if stem == "07_prompting_an_llm":
        from workbench.llm import read_transcript

        nodes = {r["node_id"]: r for r in read_transcript(ROOT / "notebooks/data/llm/vector_add_refine.jsonl")
                 if r["kind"] == "node"}
        fix = nodes["n02"]["source"].replace("mask=mask & (offs < N)", "mask=mask")
        return {"exercise1_solution": {"candidates_change": False, "turns_without_error_text": [2, 3, 4]},
                "exercise2_solution": fix}
    if stem == "08_flash_attention":
        return {"exercise1_solution": (SOLUTIONS / f"{stem}.py").read_text(),
                "exercise2_solution": (SOLUTIONS / f"{stem}_2.py").read_text()}
    return {"exercise1_solution": (SOLUTIONS / f"{stem}.py").read_text()}


def test_notebooks_are_stored_without_outputs_and_with_unsolved_exercises():
    for path in TUTORIALS + STUDIES:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, f"{path.name} has outputs"
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one `parameters` cell"
    for path in TUTORIALS:
        params = "".join(next(c for c in json.loads(path.read_text())["cells"]
                              if "parameters" in c.get("metadata", {}).get("tags", []))["source"])
        for n in range(1, EXERCISES[path.stem] + 1):
            assert f"exercise{n}_solution = None" in params, path.name
        assert "# TODO" in path.read_text(), f"{path.name}: an exercise must ship as a visible stub"
    assert set(EXERCISES) == {p.stem for p in TUTORIALS}


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs_on_cpu_as_shipped_then_solved(path, tmp_path, tmp_path_factory, monkeypatch):
    """As shipped, top to bottom in a fresh kernel: every auto-check says "not solved yet". Then, in the same kernel,
    what a student re-runs once the exercises are solved: from the first exercise to the end, with the worked
    solutions as papermill parameters; every auto-check says "solved"."""
    from jupyter_client.manager import AsyncKernelManager

    # Measured ceilings (tutorial 05) go to a cache of this test session, never to the home directory.
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kwb-cache"))
    km = AsyncKernelManager(kernel_name="python3")
    try:
        _check_tutorial_run(path, False, *_execute(path, tmp_path / "as-shipped", km, device="cpu"))
        rerun = _from_first_exercise(path, tmp_path / "solved-source")
        _check_tutorial_run(path, True, *_execute(rerun, tmp_path / "solved", km, **_solutions(path.stem)))
    finally:
        _shutdown(km)


def _check_tutorial_run(path: Path, solved: bool, nb: dict, seconds: float) -> None:
    """The run's errors, verdicts and time; what the cells before the exercises show is checked on the as-shipped
    run (the solved re-run starts at the first exercise)."""
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    verdicts = VERDICT.findall(_stdout(nb))
    assert [n for n, _, _ in verdicts] == [str(n) for n in range(1, EXERCISES[path.stem] + 1)], verdicts
    expected = "solved" if solved else "not solved yet"
    assert all(v == expected for _, v, _ in verdicts), verdicts
    if path.stem in ("01_first_kernel", "04_tiling_matmul") and not solved:
        _assert_triton_viz_used_or_said_once(nb, path.stem)
    if path.stem == "05_roofline" and not solved:
        _assert_roofline_shows_ceilings_and_kernels(nb)
    if path.stem == "07_prompting_an_llm":
        _assert_exercise_reveals_after_prediction_only(nb, solved)
    _assert_offline(nb, path.name)
    # Tutorials promise a CPU-only laptop run in under a minute; CI's 2 shared cores get some slack.
    assert seconds < 120, f"{path.name} took {seconds:.0f} s"


def _assert_offline(nb: dict, name: str) -> None:
    """Nothing a notebook shows loads from the network: no plotly.js from a CDN, no `notebook_connected`."""
    text = json.dumps(nb)
    for marker in ("cdn.plot.ly", "notebook_connected", "require.config", "https://cdn"):
        assert marker not in text, f"{name} reaches the network for {marker!r}"


def test_tutorials_and_studies_draw_figures_without_the_network():
    """The shipped sources too (an unexecuted notebook would fetch plotly.js the first time a student runs it)."""
    offenders = [p.name for p in TUTORIALS + STUDIES
                 if "notebook_connected" in p.read_text() or "cdn.plot.ly" in p.read_text()]
    assert not offenders, offenders


def _assert_roofline_shows_ceilings_and_kernels(nb: dict) -> None:
    """Tutorial 05 on a CPU: this machine's measured ceilings are printed; the plot projects each task's counted
    work on the H100's datasheet roofline (bound and floor in the legend) and places the kernels the notebook
    evaluated by name at their counted work; their interpreter times are printed, never plotted."""
    out = _stdout(nb)
    assert re.search(r"this machine, measured \(cpu: .*\):\n  copy [\d.]+ [kMGT]?B/s, fp32 matmul [\d.]+ [kMGT]?FLOP/s", out), out
    figures = [o["data"]["application/vnd.plotly.v1+json"] for c in nb["cells"] for o in c.get("outputs", [])
               if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 1
    traces = figures[0]["data"]
    measured = [t for t in traces if t.get("name") == "results"]
    assert measured and all(not t.get("x") for t in measured), "interpreter times must not be plotted"
    projected = [t for t in traces if (t.get("meta") or {}).get("projection") and not t["meta"].get("kernel")]
    assert len(projected) == 4 and "projection" in figures[0]["layout"]["title"]["text"]
    bounds = {t["name"].split(" (")[0]: t["meta"]["bound"] for t in projected}
    assert bounds == {"vector_add": "memory", "softmax": "memory", "layernorm": "memory", "matmul": "compute"}
    kernels = [t for t in traces if (t.get("meta") or {}).get("kernel")]
    assert [t["name"].split(" (")[0] for t in kernels] == ["vector_add-solution", "softmax-solution"]
    assert all(t["marker"]["symbol"] == "star" and "on H100 SXM" in t["name"] for t in kernels)
    assert "matmul      floor on an H100: 0.1389 ms (compute-bound)" in out
    assert "on the interpreter clock, not a hardware time; the star is its counted work" in out


def _assert_triton_viz_used_or_said_once(nb: dict, stem: str) -> None:
    """Tutorials 01 and 04 with triton-viz: the trace agrees with the index arithmetic (04) and the sanitizer
    catches 01's unmasked load. Without a usable triton-viz: one line says why, and the lesson is told from the
    index arithmetic."""
    from workbench.memory_trace import triton_viz_status

    out = _stdout(nb)
    usable, line = triton_viz_status()
    mentions = [m for m in out.splitlines() if "triton-viz" in m]
    if usable is None:
        assert mentions == [line], mentions
        assert "from the index arithmetic" in out, out
    else:
        assert "traced with triton-viz" in out and "from the index arithmetic" not in out, out
    if stem == "01_first_kernel":
        assert "program 3 loads x[768..999], 24 lanes masked off" in out, out
        assert ("out-of-bounds load of `x_ptr`" in out) == (usable is not None), out
        assert "`y_ptr`" not in out, out
    else:
        assert "BLOCK_N=16: each element of A is loaded 4 times" in out and "4-4" not in out, out


def _assert_exercise_reveals_after_prediction_only(nb: dict, solved: bool) -> None:
    """Tutorial 07's first exercise: before a prediction the check says only "not solved yet" and what to fill
    in; the replay's outcome and its explanation come once a prediction exists."""
    out = _stdout(nb)
    reveals = ("candidates changed", "turns whose prompt lost the error text", "cannot change")
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert not any(r in markdown for r in reveals), "the explanation must not be readable before predicting"
    if solved:
        assert all(r in out for r in reveals), out
        assert "turns whose prompt lost the error text: [2, 3, 4]" in out
    else:
        assert not any(r in out for r in reveals), out
        assert "exercise 1: not solved yet - fill in `my_prediction`" in out


def test_first_tutorial_points_to_the_second_and_its_text_matches_its_code():
    nb = json.loads((ROOT / "notebooks/01_first_kernel.ipynb").read_text())
    markdown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "](02_fusion_softmax.ipynb)" in markdown[-1]
    assert "(max(n // 128, 1),)" in code
    exercise = next(m for m in markdown if m.startswith("## Exercise"))
    assert "`max(n // 128, 1)`" in exercise and "`n // 128` instead" not in exercise


#: Small but real parameters per study, given as a user types them (JSON text for lists and dicts).
STUDY_PARAMETERS = {
    "block_size_sweep": ["-p", "block_sizes", "[64, 128]", "-p", "num_warps", "[1]",
                         "-p", "size", '{"batch_size": 2, "dim": 256}', "-p", "rounds", "2"],
    "variant_shootout": ["-p", "variants", '["solution", "candidates/softmax/online.py"]',
                         "-p", "sizes", '[{"batch_size": 2, "dim": 64}, {"batch_size": 4, "dim": 128}]',
                         "-p", "rounds", "2"],
    "kernelbench_sweep": ["-p", "rounds", "2"],
    "llm_ablation": ["-p", "model", '["scripted-careful"]', "-p", "strategy", '["refine"]',
                     "-p", "feedback", '["full", "none"]', "-p", "max_turns", "3"],
    "llm_replay": [],
    "published_audit": ["-p", "rounds", "2"],
}
#: Results each study stores with those parameters.
STUDY_RESULTS = {"block_size_sweep": 2, "variant_shootout": 4, "kernelbench_sweep": 6, "llm_ablation": 6,
                 "llm_replay": 5, "published_audit": 5}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_study_runs_with_plain_papermill_from_the_repository_root(path, tmp_path):
    store = tmp_path / "results.db"
    papermill_cli = Path(sys.executable).with_name("papermill")
    cmd = [str(papermill_cli)] if papermill_cli.exists() else [sys.executable, "-m", "papermill"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWB_")}
    out = tmp_path / path.name
    proc = subprocess.run([*cmd, str(path.relative_to(ROOT)), str(out), "--no-progress-bar", "-p", "device", "cpu",
                           "-p", "store_path", str(store), "-p", "run_id", "ci", "-p", "point_id", "p0",
                           *STUDY_PARAMETERS[path.stem]], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    size = out.stat().st_size
    assert size < 2_000_000, f"executed {path.name} is {size} bytes: widget state or plotly.js leaked into it"
    _assert_offline(json.loads(out.read_text()), path.name)
    from workbench.store import Store

    frame = Store(str(store)).frame(run_id="ci")
    assert len(frame) == STUDY_RESULTS[path.stem], frame[["task", "candidate_name", "status"]].to_string()
    if path.stem == "llm_replay":  # the recorded session, replayed: its verdicts in order, stored at this point
        assert "identical to the recorded table (5 candidates)" in _stdout(json.loads(out.read_text()))
        assert list(frame["status"]) == ["rejected", "compile_error", "runtime_error", "ok", "ok"]
        assert set(frame["point_id"]) == {"p0"}
    if path.stem == "published_audit":  # the example release on the CPU: three claims fall, one waits for a GPU
        printed = _stdout(json.loads(out.read_text()))
        assert "4 kernels: 0 survive, 3 do not, 1 n/a" in printed, printed
        assert sorted(frame["status"]) == ["incorrect", "ok", "ok", "ok", "rejected"]
        assert (tmp_path / "audits" / "ci-p0" / "audit.html").stat().st_size < 1_000_000
