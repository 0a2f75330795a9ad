"""Widgets without a browser: hand-built Results in, rendered state out; one real evaluation path end to end.
(The verdict card and error map: test_verdict.py; the cell magic: test_magic.py.)"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")


import widgets  # noqa: E402
from widgets._records import Record, parse_flags, size_label, to_records  # noqa: E402
from widgets._runner import Job  # noqa: E402
from widgets.editor import KernelEditor, build_candidate, solution_source, starter_source  # noqa: E402
from widgets.results_table import ResultsTable, records_html, sort_records  # noqa: E402
from widgets.roofline_view import RooflineView, roofline_point  # noqa: E402
from widgets.static import figure_html, join  # noqa: E402
from widgets.sweep import SweepExplorer, best_html, default_grid, parse_grid  # noqa: E402
from widgets.sweep_plot import heatmap_data, sweep_figure, sweep_frame  # noqa: E402
from widgets.variants import REFERENCE, VariantComparison, source_diff, variant_series  # noqa: E402
from widgets.workbench_widget import TAB_TITLES, Workbench  # noqa: E402
from workbench.errors import CandidateError  # noqa: E402
from workbench.result import Result, Timing  # noqa: E402
from workbench.store import Store  # noqa: E402
from workbench.tasks.task import get_task  # noqa: E402


@pytest.fixture(autouse=True)
def _shared_ceilings_cache(tmp_path_factory, monkeypatch):
    """The CPU roofline is measured (seconds), once per test session, never read from or written to home."""
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kwb-cache"))


def timing(ms: float, clock: str = "cuda-events") -> Timing:
    return Timing(median_ms=ms, min_ms=ms * 0.9, max_ms=ms * 1.3, iqr_ms=ms * 0.1, ci95_low_ms=ms * 0.95,
                  ci95_high_ms=ms * 1.05, n=50, clock=clock)


def result(name: str = "k", status: str = "ok", ms: float | None = 1.0, *, n: int = 4096, clock: str = "cuda-events",
           speedup: float | None = None, sol: float | None = None, flags: list[str] | None = None, message: str = "",
           source: str = "", ref_ms: float | None = None, task: str = "vector_add", **kw) -> Result:
    return Result(task=task, candidate_id=f"id-{name}", candidate_name=name, language="triton", status=status,
                  message=message, flags=flags or [], size={"n": n}, device="cuda" if clock != "interpreter" else "cpu",
                  timing=timing(ms, clock) if ms is not None else None,
                  reference_timing=timing(ref_ms, clock) if ref_ms is not None else None, speedup=speedup,
                  sol_fraction=sol, flops=float(n), bytes=12.0 * n, source=source or f"# {name}\n", **kw)


# ---- editor --------------------------------------------------------------------------------------------

def test_editor_renders_a_result_and_its_error_heatmap():
    ed = KernelEditor("vector_add", device="cpu")
    assert ed.source == starter_source(get_task("vector_add")) and "@triton.jit" in ed.source
    assert build_candidate(ed.source).id[:8] in ed._info.value
    assert 'data-kwb-status="idle"' in ed._panel.value
    error_map = [[0.1, 0.2, 0.3], [0.2, 4.0, 0.1]]
    ed.show(result("zeros", "incorrect", None, flags=["mismatch"], details={"error_map": error_map}))
    assert ed.status == "incorrect" and 'data-kwb-status="incorrect"' in ed._panel.value
    assert [[cell[1] for cell in row] for row in ed._heatmap.data[0].customdata] == error_map
    assert ed._heatmap_box.layout.display == "flex"
    bundle = ed._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "plotly-graph-div" in bundle["text/html"] and 'data-kwb-status="incorrect"' in bundle["text/html"]
    ed.show(result("ok1d", details={"error_map": [0.1, 0.2]}))  # 1-D output: no heatmap
    assert ed._heatmap_box.layout.display == "none" and "plotly-graph-div" not in ed.to_html()


def test_editor_opens_on_a_skeleton_with_the_solution_one_click_away():
    """Students start from the task's contract (signatures, TODOs), never from its answer; "Show solution"
    shows it and a second click puts their own code back."""
    task = get_task("softmax")
    ed = KernelEditor(task, device="cpu")
    solution = solution_source(task)
    assert ed.source == starter_source(task) != solution
    assert "def forward(self, x: torch.Tensor) -> torch.Tensor:" in ed.source and "TODO" in ed.source
    assert "#   return torch.softmax(x, dim=-1)" in ed.source  # what to compute, as a comment
    assert "tl.max" not in ed.source and "tl.exp" not in ed.source  # nothing of the answer
    assert ed._reset.description == "Show solution"
    ed.source = ed.source.replace("pid = tl.program_id(0)", "pid = tl.program_id(0)  # my start")
    mine = ed.source
    ed._reset.click()
    assert ed.source == solution and ed._reset.description == "Back to my code"
    ed._reset.click()
    assert ed.source == mine and ed._reset.description == "Show solution"


def test_skeletons_of_every_builtin_task_keep_the_reference_contract():
    """Each skeleton parses, builds ModelNew with the reference's constructor, and fails on purpose with the
    message that says what to write (not a SyntaxError or a TypeError about arguments)."""
    import ast

    from widgets.skeleton import is_starting_point, skeleton_source
    from workbench.tasks.task import tasks

    for name in tasks():
        task = get_task(name)
        src = skeleton_source(task)
        tree = ast.parse(src)
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        ref = {n.name: n for n in ast.parse(task.source).body if isinstance(n, ast.ClassDef)}["Model"]
        for method in ("__init__", "forward"):
            mine = next((f for f in classes["ModelNew"].body if getattr(f, "name", "") == method), None)
            theirs = next((f for f in ref.body if getattr(f, "name", "") == method), None)
            if theirs is not None:
                assert ast.unparse(mine.args) == ast.unparse(theirs.args), (name, method)
        namespace: dict = {}
        exec(compile(src, f"<{name}>", "exec"), namespace)  # noqa: S102 - our own generated source
        ref, size = task.load(), task.size(None, "cpu")
        model = namespace["ModelNew"](*ref.init_inputs(size))
        with pytest.raises(NotImplementedError, match="write the kernel launch"):
            model(*ref.make_inputs(size, seed=0))
        assert is_starting_point(src, task) and is_starting_point(solution_source(task) or "", task)
        assert not is_starting_point(src + "\n# mine\n", task)


def test_editor_task_switch_keeps_edited_code_and_infers_language():
    ed = KernelEditor("vector_add", device="cpu")
    ed.task_name = "softmax"
    assert ed.source == starter_source(get_task("softmax"))  # the untouched skeleton follows the task
    ed.load_solution()
    ed.task_name = "gelu"
    assert ed.source == starter_source(get_task("gelu"))  # so does an untouched solution
    ed.task_name = "softmax"
    ed.source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    assert ed.candidate().language == "torch" and "(torch)" in ed._info.value
    ed.language = "triton"
    assert ed.candidate().language == "triton"
    ed.task_name = "vector_add"
    assert ed.source.startswith("import torch\nclass ModelNew")  # edited code is never thrown away


# ---- results table -------------------------------------------------------------------------------------

def test_sort_orders_put_unknown_values_last():
    rows = to_records([result("a", speedup=1.5, sol=0.4, ms=3.0), result("b", "rejected", None, flags=["x", "y"]),
                       result("c", speedup=3.0, sol=0.9, ms=1.0), result("d", "incorrect", None, flags=["mismatch"])])
    assert [r.name for r in sort_records(rows, "speedup")] == ["c", "a", "b", "d"]
    assert [r.name for r in sort_records(rows, "speedup", descending=False)] == ["a", "c", "b", "d"]
    assert [r.name for r in sort_records(rows, "time")] == ["c", "a", "b", "d"]
    assert [r.name for r in sort_records(rows, "status")] == ["c", "a", "d", "b"]  # then fastest first
    assert [r.name for r in sort_records(rows, "flags")] == ["a", "c", "d", "b"]
    html = records_html(sort_records(rows, "sol"))
    assert html.index(">c<") < html.index(">a<") < html.index(">b<")


def test_results_table_reads_a_real_store_and_sorts(tmp_path):
    store = Store(tmp_path / "r.db")
    for r in (result("slow", ms=4.0, speedup=0.5), result("fast", ms=1.0, speedup=2.0),
              result("cheat", "rejected", None, flags=["stale-memory"]), result("other", task="softmax")):
        store.add(r)
    table = ResultsTable(store, task="vector_add")
    assert [r.name for r in table.records] == ["fast", "slow", "cheat"]  # passing first, fastest first
    table.sort_by = "speedup"
    assert table.descending is True and [r.name for r in table.records] == ["fast", "slow", "cheat"]
    table.sort_by = "time"
    assert table.descending is False and [r.name for r in table.records] == ["fast", "slow", "cheat"]
    rec = table.records[0]
    assert rec.ci_low_ms == pytest.approx(0.95) and rec.clock == "cuda-events" and rec.size == {"n": 4096}
    assert "stale-memory" in table._html.value and "3 results, 2 ok" in table._count.value
    store.add(result("new", ms=0.5))
    table.refresh()
    assert table.records[0].name == "new"
    one = ResultsTable(None, results=[result("only")])
    assert "1 result, 1 ok" in one._count.value and "1 results" not in one._count.value
    assert table._sort.style.button_width == "auto"  # labels never cut to "spee..."
    store.close()


def test_record_parsing_is_tolerant():
    assert parse_flags('["a", "b"]') == ["a", "b"] and parse_flags("a, b") == ["a", "b"] and parse_flags(None) == []
    assert size_label('{"M": 64, "N": 32}') == "M=64 N=32" and size_label({}) == "default"
    rec = Record.from_row({"task": "t", "candidate_name": "x", "status": "ok", "time_median_ms": float("nan"),
                           "flags": "[]", "size": '{"n": 5}'})
    assert rec.time_ms is None and rec.size == {"n": 5} and rec.flags == []


# ---- variants ------------------------------------------------------------------------------------------

def _variants() -> list[Result]:
    out = []
    for n, base in ((1024, 1.0), (4096, 3.0), (16384, 10.0)):
        out.append(result("v1", ms=base, n=n, ref_ms=base * 2, source="BLOCK = 64\nx = 1\n"))
        out.append(result("v2", ms=base / 2, n=n, ref_ms=base * 2, source="BLOCK = 128\nx = 1\n"))
    out.append(result("broken", "incorrect", None, n=1024))
    return out


def test_variant_series_lines_metrics_and_reference():
    series = variant_series(to_records(_variants()), "time")
    assert series.sizes == ["n=1024", "n=4096", "n=16384"]
    assert [line.name for line in series.lines] == ["v1", "v2", REFERENCE]  # failed results are not lines
    assert series.line("v2").y == [0.5, 1.5, 5.0] and series.line(REFERENCE).y == [2.0, 6.0, 20.0]
    gbs = variant_series(to_records(_variants()), "GB/s").line("v1").y
    assert gbs[0] == pytest.approx(12 * 1024 / 1e-3 / 1e9)
    tf = variant_series(to_records(_variants()), "TFLOP/s").line("v2").y
    assert tf[2] == pytest.approx(16384 / 5e-3 / 1e12)
    interp = variant_series(to_records([result("i", ms=20.0, clock="interpreter", ref_ms=1.0)]), "time")
    assert [line.name for line in interp.lines] == ["i"] and "reference (eager) not drawn: the variants ran in the Triton interpreter" in interp.note


def test_variant_widget_switches_metric_and_diffs_the_picked_variant():
    vc = VariantComparison(_variants())
    assert [tr.name for tr in vc.figure.data] == ["v1", "v2", REFERENCE]
    assert vc.figure.layout.yaxis.type == "log"
    vc.metric = "GB/s"
    assert vc.figure.layout.yaxis.title.text == "achieved bandwidth (GB/s)" and vc.figure.layout.yaxis.type == "linear"
    assert list(vc.figure.data[1].y)[0] == pytest.approx(12 * 1024 / 0.5e-3 / 1e9)
    trace = vc.figure.data[1]
    assert ("v2 at " + trace.x[1], ("v2", trace.x[1])) in vc._pick.options
    vc._pick.value = ("v2", trace.x[1])  # "show": v2 at its second size
    assert vc.selected.name == "v2" and vc.selected.size == {"n": 4096}
    assert vc._other.value == "v1"  # diffed against the other variant by default
    html = vc._selection.value
    assert 'data-kwb-variant="v2"' in html and "-BLOCK = 64" in html and "+BLOCK = 128" in html
    assert source_diff("a\nb\n", "a\nc\n", "old", "new").splitlines()[2:] == ["@@ -1,2 +1,2 @@", " a", "-b", "+c"]
    assert "plotly-graph-div" in vc.to_html() and "+BLOCK = 128" in vc.to_html()
    # Sized by their labels: fixed widths cut "TFLOP/s" to "TFLO..." and "Time over sizes" to "Time over ..."
    # (the browser test measures the rendered buttons).
    assert vc._metric.style.button_width == "auto" and vc._sweep.layout.width == "auto"


# ---- roofline ------------------------------------------------------------------------------------------

def _gpu(name: str, ms: float, n: int, device_name: str = "NVIDIA H100 80GB HBM3") -> Result:
    """A GPU-timed result built by hand: this machine has no GPU, and the roofline must be exercised anyway."""
    return result(name, ms=ms, n=n, device_name=device_name)


def test_roofline_view_draws_only_results_timed_on_its_roofs():
    from roofline.ceilings import Ceilings

    results = [_gpu("a100", 1.0, 1 << 20, device_name="NVIDIA A100-SXM4-80GB"),
               result("interp", ms=5.0, clock="interpreter"), _gpu("gpu", 1.0, 1 << 20), result("failed", "incorrect", None)]
    view = RooflineView(results, device="cpu")
    assert view._picker.value == "gpu:NVIDIA H100 80GB HBM3"  # the GPU of the latest GPU result, not this CPU
    labels = [o[0] for o in view._picker.options]
    assert labels[:3] == ["NVIDIA H100 80GB HBM3: datasheet", "NVIDIA A100-SXM4-80GB: datasheet", "CPU (measured)"]
    assert labels[3] == "H100 SXM: datasheet, projection of counted work"  # measured roofs first, projections after
    figure = view.figure
    assert [p["name"] for p in view.points] == ["gpu"]
    reasons = {s["name"]: s["reason"] for s in view.skipped}
    assert reasons == {"interp": "Triton interpreter time: not hardware",
                       "a100": "ran on NVIDIA A100-SXM4-80GB, not on H100 SXM", "failed": "not timed (incorrect)"}
    assert "Not on this roofline (3)" in view._side.value and "ran on NVIDIA A100" in view._side.value
    roofs = [tr.name for tr in view.figure.data if tr.mode == "lines"]
    assert roofs == ["FP32 67 TFLOP/s (datasheet)", "FP16 tensor 989 TFLOP/s (datasheet)"]
    assert view.figure.layout.yaxis.title.text == "performance (TFLOP/s)"
    view.add_many([_gpu("gpu2", 0.5, 1 << 22), _gpu("gpu3", 0.7, 1 << 22)])
    dots = [tr for tr in view.figure.data if tr.mode == "markers"]
    assert len(view.points) == 3 and len(dots) == 1 and len(dots[0].x) == 3  # one trace, appended in place
    assert list(dots[0].y)[1] == pytest.approx((1 << 22) / 0.5e-3)
    view._picker.value = "gpu:NVIDIA A100-SXM4-80GB"  # the other GPU's roofs: its result, nothing else
    assert [p["name"] for p in view.points] == ["a100"]
    assert "A100 SXM 80GB (datasheet)" in view.figure.layout.title.text
    view._picker.value = "cpu"  # the measured CPU: no CPU wall-clock results, an honest empty state
    assert view.points == [] and len(view.skipped) == 6
    assert view.figure is figure  # one widget refilled: no new 5 MB widget model per redraw
    notes = [a.text for a in view.figure.layout.annotations]
    assert any(t.startswith("no CPU wall-clock results yet") for t in notes)
    assert any(t.startswith("DRAM ") and t.endswith("(measured)") for t in notes)
    given = Ceilings("test-gpu", copy_bandwidth=2e12, matmul_flops={"fp32": 5e13}, device="cuda")
    mine = RooflineView([result("x", ms=2.0, n=100)], device="cpu", ceilings=given)
    assert mine._picker.value == "gpu:test-gpu" and mine._picker.label == "test-gpu: measured"
    assert len(mine.points) == 1
    h100 = Ceilings("NVIDIA H100 80GB HBM3", 3.02e12, {"fp32": 52e12, "fp16": 668e12}, device="cuda")
    both = RooflineView([_gpu("gpu", 1.0, 1 << 20)], device="cpu", ceilings=h100)  # datasheet beside measured
    assert both._picker.label == "NVIDIA H100 80GB HBM3: datasheet + measured"
    assert len([tr for tr in both.figure.data if tr.mode == "lines"]) == 4
    assert roofline_point(to_records([result("x", ms=2.0, n=100)])[0])["bytes_per_s"] == pytest.approx(1200 / 2e-3)
    html = mine.to_html()
    assert "plotly-graph-div" in html and "test-gpu (measured)" in html


def test_on_a_cpu_the_roofline_projects_counted_work_onto_a_datasheet_gpu():
    """Interpreter results have counted FLOPs and bytes: each task at each size is one hollow diamond on the
    H100's datasheet roofline, labelled a projection with its bound and floor; nothing measured is drawn."""
    rows = [result("a", ms=5.0, n=1 << 20, clock="interpreter"), result("b", ms=4.0, n=1 << 20, clock="interpreter"),
            result("c", "incorrect", None, n=1 << 10), result("nowork", ms=1.0, clock="interpreter")]
    rows[-1].flops = rows[-1].bytes = None
    view = RooflineView(rows, device="cpu")
    assert view._picker.value == "projection:H100 SXM" and view.projecting
    figure = view.figure
    diamonds = [tr for tr in figure.data if (tr.meta or {}).get("projection")]
    assert len(diamonds) == 2  # n=2^20 (a and b share it) and n=2^10
    assert all(tr.marker.symbol == "diamond-open" for tr in diamonds)
    big = next(tr for tr in diamonds if "n=1048576" in tr.name)
    assert "memory-bound, floor" in big.name and "on H100 SXM" in big.name and "ran: a, b" in big.text[0]
    n = 1 << 20  # result() counts n FLOPs and 12 n bytes: 1/12 FLOP/byte, far left of the H100's ridge
    assert big.x[0] == pytest.approx(1 / 12) and big.y[0] == pytest.approx(3.35e12 / 12)
    assert big.meta["floor_s"] == pytest.approx(12 * n / 3.35e12) and big.meta["bound"] == "memory"
    assert "projection: counted work, not measured times" in figure.layout.title.text
    assert "Projection, not a measurement." in view._note.value
    assert "nowork" in view._side.value and "no counted work" in view._side.value
    assert not [tr for tr in figure.data if tr.name == "results" and tr.x]  # no measured point at all
    view.add(result("d", ms=3.0, n=1 << 12, clock="interpreter"))
    assert view.figure is figure and len([tr for tr in figure.data if (tr.meta or {}).get("projection")]) == 3
    view._picker.value = "projection:A100 SXM 80GB"
    assert view.figure is figure and "A100 SXM 80GB" in figure.layout.title.text
    assert "projection" in view.to_html()


# ---- sweep ---------------------------------------------------------------------------------------------

def _rows(knobs: list[str], cells: list[tuple]) -> list[dict]:
    out = []
    for values, status, ms in cells:
        t = ms if status == "ok" else None
        out.append({**dict(zip(knobs, values, strict=True)), "status": status, "flags": [], "time_ms": t,
                    "ci95_low_ms": t and t * 0.9, "ci95_high_ms": t and t * 1.1, "clock": "wall", "speedup": None,
                    "sol_fraction": None, "candidate": "c"})
    return out


def test_grid_parsing_heatmap_and_line_plots():
    assert parse_grid("BLOCK = 64, 128  # rows\n\nnum_warps=2,4") == {"BLOCK": [64, 128], "num_warps": [2, 4]}
    assert parse_grid("softmax_row_kernel.BLOCK = 256") == {"softmax_row_kernel.BLOCK": [256]}
    for bad, why in (("", "empty"), ("BLOCK 64", "NAME = value"), ("BLOCK = foo", "literals"), ("2x = 1", "NAME"),
                     ("BLOCK =", "no values"), ("BLOCK = 1\nBLOCK = 2", "given twice")):
        with pytest.raises(CandidateError, match=why):
            parse_grid(bad)
    assert default_grid(get_task("softmax").solution_candidate().source) == {"BLOCK": [256, 512, 1024],
                                                                             "num_warps": [2, 4]}
    assert default_grid("def broken(:") == {}
    knobs = ["BLOCK", "num_warps"]
    rows = _rows(knobs, [((64, 2), "ok", 3.0), ((64, 4), "ok", 2.0), ((128, 2), "incorrect", 1.5),
                         ((128, 4), "ok", 9.0)])
    data = heatmap_data(sweep_frame(rows, knobs), knobs)
    assert data["x"] == [64, 128] and data["y"] == [2, 4]
    assert data["z"] == [[3.0, None], [2.0, 9.0]] and data["text"][0][1] == "incorrect"
    assert data["best"] == {"BLOCK": 64, "num_warps": 4, "time_ms": 2.0} and data["text"][1][0] == "★ 2 ms"
    fig = sweep_figure(sweep_frame(rows, knobs), knobs)
    failed, times = fig.data[0], fig.data[1]
    assert failed.name == "failed" and [list(r) for r in failed.z] == [[None, 1], [None, None]]
    assert failed.text[0][1] == "incorrect" and times.name == "time"
    (frame,) = fig.layout.shapes  # the best cell is framed
    assert (frame.x0, frame.x1, frame.y0, frame.y1) == (-0.5, 0.5, 0.5, 1.5)
    assert "fastest correct: BLOCK=64, num_warps=4" in fig.layout.title.text
    line = sweep_figure(sweep_frame(_rows(["BLOCK"], [((64,), "ok", 3.0), ((128,), "timeout", 0),
                                                      ((256,), "ok", 2.0)]), ["BLOCK"]), ["BLOCK"])
    hi, lo, median, failed_pts, best = line.data
    assert list(median.x) == ["64", "256"] and list(median.y) == [3.0, 2.0]
    assert list(lo.y) == [pytest.approx(2.7), pytest.approx(1.8)] and lo.fill == "tonexty"
    assert list(hi.y) == [pytest.approx(3.3), pytest.approx(2.2)]
    assert list(failed_pts.x) == ["128"] and list(failed_pts.text) == ["timeout"]
    assert list(best.x) == ["256"] and tuple(line.layout.xaxis.categoryarray) == ("64", "128", "256")


def test_sweep_star_says_when_it_is_within_noise_and_what_the_interpreter_measures():
    best = {"BLOCK": 256, "num_warps": 2, "time_ms": 5.3}
    plain = best_html(best)
    assert "fastest correct config" in plain and "within noise" not in plain and "interpreter" not in plain
    tied = best_html(best, True, 3, "interpreter")
    assert "within noise of 3 other configs" in tied and "num_warps and num_stages do nothing" in tied
    assert "within noise of 1 other config:" in best_html(best, True, 1, "cuda-events")
    assert "No config passed" in best_html(None) and best_html(best, ran=False) == ""


def test_sweep_explorer_bad_input_is_a_message_and_the_empty_state_is_help():
    sweep = SweepExplorer("softmax", device="cpu")
    assert sweep.grid_spec == "BLOCK = 256, 512, 1024\nnum_warps = 2, 4"  # from the shipped solution's launches
    assert sweep._figure_box.layout.display == "none"  # no fake grid before anything ran
    assert "launch parameter of softmax_row_kernel, softmax_looped_kernel" in sweep._help.value
    sweep.grid_spec = "BLOKC = 64"
    assert sweep.run(block=True) is None
    assert "no knob &#x27;BLOKC&#x27;" in sweep._status.value and "kwb-sweep-error" in sweep._status.value
    sweep.grid_spec = "BLOCK = "
    assert sweep.run(block=True) is None and "has no values" in sweep._status.value
    assert "kwb-sweep-help" in sweep.to_html()


# ---- static rendering ----------------------------------------------------------------------------------

def test_static_html_includes_plotly_once():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1], y=[2]))
    assert "plotly-graph-div" in figure_html(fig, include_plotlyjs=False)
    page = join(["<p>a</p>", fig, fig], include_plotlyjs=True)
    assert page.count("plotly-graph-div") >= 2 and len(page) > 1_000_000
    assert len(join([fig, fig], include_plotlyjs=True)) < len(figure_html(fig, True)) + 20_000


def test_lazy_package_exports():
    assert widgets.Workbench is Workbench and "ResultsTable" in dir(widgets)
    with pytest.raises(AttributeError, match="widgets: KernelEditor"):
        widgets.NoSuchWidget  # noqa: B018


# ---- background jobs -----------------------------------------------------------------------------------

def test_job_delivers_results_errors_and_drops_cancelled():
    got: list = []
    job = Job(lambda j: 41 + 1, on_done=got.append).start()
    assert job.wait(5) and got == [42] and job.state == "done"
    errors: list = []
    Job(lambda j: 1 / 0, on_error=errors.append).start().wait(5)
    assert isinstance(errors[0], ZeroDivisionError)
    late: list = []
    cancelled: list = []
    slow = Job(lambda j: time.sleep(0.5) or "late", on_done=late.append, on_cancel=lambda: cancelled.append(1)).start()
    slow.cancel()
    assert slow.state == "cancelled" and cancelled == [1]
    time.sleep(0.8)
    assert late == []  # the late answer is dropped


# ---- real evaluations (worker processes, Triton interpreter) -------------------------------------------

HANG = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        while True:
            pass
"""


def _tree(widget) -> list:
    """A widget and everything under it (children, tabs, boxes)."""
    out = [widget]
    for child in getattr(widget, "children", ()) or ():
        out += _tree(child)
    return out


def test_figures_are_drawn_through_the_plotly_mime_type_not_a_5mb_widget_model_each():
    """A plotly FigureWidget is an anywidget model carrying plotly.js (~5 MB) in its state, one per figure;
    reopening a notebook loaded them all and anywidget dropped models that took over 2 s (the editor came back
    empty). Every figure of the Workbench is a plain Figure shown through the mime type in an Output, and
    it redraws once per batch of changes."""
    anywidget = pytest.importorskip("anywidget")
    from widgets._plot import PLOTLY_MIME, live_figure
    from widgets.code_editor import CodeEditor

    ui = Workbench("softmax", device="cpu")
    widgets_in_it = _tree(ui)
    heavy = [type(x).__name__ for x in widgets_in_it if isinstance(x, anywidget.AnyWidget) and not isinstance(x, CodeEditor)]
    assert heavy == [] and sum(isinstance(x, CodeEditor) for x in widgets_in_it) == 1
    figures = [ui.editor._heatmap, ui.variants.figure, ui.roofline.figure, ui.sweep.figure, ui.prompt.figure]
    assert all(f.view in widgets_in_it for f in figures)
    roofline = ui.roofline.figure.view.outputs[0]["data"][PLOTLY_MIME]
    assert roofline["config"]["displaylogo"] is False and roofline["layout"]["title"]["text"].startswith("Projection")

    fig, sent = live_figure(), []
    fig.view.observe(lambda change: sent.append(change["new"]), "outputs")
    import plotly.graph_objects as go

    with fig.batch_update():
        fig.add_trace(go.Scatter(x=[1, 2], y=[3, 4], name="a"))
        fig.data[0].y = [5, 6]
        fig.update_layout(title={"text": "t"})
    assert len(sent) == 1 and sent[0][0]["data"][PLOTLY_MIME]["data"][0]["y"] == [5, 6]
    fig.layout.title.text = "u"  # outside a batch: one redraw per change
    assert len(sent) == 2 and sent[1][0]["data"][PLOTLY_MIME]["layout"]["title"]["text"] == "u"


def test_workbench_runs_cancels_and_sweeps_for_real(tmp_path):
    ui = Workbench("vector_add", store=tmp_path / "wb.db", device="cpu", timeout=120)
    assert list(ui.tabs.titles) == list(TAB_TITLES) and ui.prompt is not None
    ed = ui.editor
    ed.source = HANG
    ed.run()
    assert ed.status == "running" and ed._cancel.disabled is False
    time.sleep(1.0)
    ed.cancel()
    assert ed.status == "cancelled" and 'data-kwb-status="cancelled"' in ed._panel.value and not ed._run.disabled
    ed.load_solution()
    ed.run()
    assert ed.job.wait(150) and ed.status == "ok", ed._panel.value
    assert 'data-kwb-status="ok"' in ed._panel.value and "interpreter clock" in ed._panel.value
    assert [r.status for r in ui.table.records] == ["ok"]  # stored, and the table re-read the store
    # No GPU measured anything: the tab projects the counted work on the H100's datasheet roofline instead.
    assert ui.roofline.projecting and ui.roofline.skipped == []
    assert [(tr.meta or {}).get("bound") for tr in ui.roofline.figure.data if (tr.meta or {}).get("projection")] == [
        "memory"]
    assert [tr.name for tr in ui.variants.figure.data][0] == ed.result.candidate_name

    ui.variants.run_sizes(block=True)  # the editor's kernel at the task's CPU sweep sizes
    names = [line.name for line in ui.variants.series.lines]
    assert names == [ed.result.candidate_name] and ui.variants.series.sizes == ["n=1000", "n=8192", "n=12345"], [(r.status, r.flags, r.message[:600]) for r in ui.table.records]
    assert "not drawn" in ui.variants.series.note  # interpreter times: no eager reference line

    sweep = ui.sweep  # the shipped solution, unedited: its `block` variable sizes the grid, so it is the knob
    assert sweep.grid_spec == "block = 128, 256, 512\nnum_warps = 2, 4"
    sweep.grid_spec = "block = 128, 1024"
    frame = sweep.run(block=True)
    assert list(frame["block"]) == [128, 1024] and list(frame["status"]) == ["ok", "ok"], [(r.flags, r.message) for r in sweep.results]
    assert sweep.best["block"] in (128, 1024) and "&#9733;" in sweep._best.value
    assert sweep._progress.value == 2 and len(ui.table.records) == 5
    assert sweep._figure_box.layout.display == "flex" and sweep.figure.data[2].name == "median time"
    html = ui.to_html()
    # Variants, roofline and sweep draw; the prompt tab has run nothing, so it draws no empty "1 / time" axes.
    assert all(f">{title}</h3>" in html for title in TAB_TITLES) and html.count("plotly-graph-div") == 3
    assert ui.prompt.figure_box.layout.display == "none"


# ---- in a real kernel: the saved output is small and readable without widget state ------------------------

def test_saved_notebook_output_carries_small_static_html(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from pathlib import Path

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nos.environ['KWB_CACHE_DIR'] = " + repr(os.environ["KWB_CACHE_DIR"]) + "\n"
        "from widgets import Workbench\nWorkbench('vector_add', device='cpu')")]
    root = Path(__file__).resolve().parents[1]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(root)}}).execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["execute_result"], outputs
    data = outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" in data
    html = data["text/html"]
    assert 'class="kwb-static"' in html and 'data-kwb-status="idle"' in html and "plotly-graph-div" in html
    assert len(nbformat.writes(nb)) < 100_000  # no plotly.js and (store_widget_state=False) no widget state


def test_discarding_the_devices_judge_really_ends_it():
    """The widgets' Cancel ends a hung evaluation's judge (widgets._runner.discard_judge): the judge process is
    gone afterwards, and the next evaluation gets a fresh one (the pooled judge: the fresh one stays for the rest)."""
    import workbench as wb
    from widgets._runner import discard_judge

    task = get_task("vector_add")
    first = wb.evaluate(task, task.solution_candidate(), device="cpu", time_it=False)
    pid = first.metadata["judge_pid"]
    discard_judge("cpu")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and \
            open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    second = wb.evaluate(task, task.solution_candidate(), device="cpu", time_it=False)
    assert second.status == "ok" and second.metadata["judge_pid"] != pid
