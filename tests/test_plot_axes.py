"""Log axes label their ticks with full numbers (never plotly's bare leading digits, where 300 ms reads "3"), and
every trace that draws markers has a legend entry or labels of its own."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from widgets._plot import log_ticks  # noqa: E402
from workbench.result import Result, Timing  # noqa: E402
from workbench.store import Store  # noqa: E402


def _timing(ms: float, clock: str = "cuda-events") -> Timing:
    return Timing(median_ms=ms, min_ms=ms * 0.9, max_ms=ms * 1.2, iqr_ms=ms * 0.05, ci95_low_ms=ms * 0.9,
                  ci95_high_ms=ms * 1.1, n=50, clock=clock, stop_reason="ci-target")


def _result(name: str, ms: float, n: int, clock: str = "cuda-events", **kw) -> Result:
    return Result(task="vector_add", candidate_id=f"id-{name}-{n}", candidate_name=name, language="triton",
                  status="ok", size={"n": n}, device="cpu" if clock == "interpreter" else "cuda",
                  timing=_timing(ms, clock), flops=float(n), bytes=12.0 * n, **kw)


def _assert_full_labels(axis) -> None:
    """An axis with explicit ticks, each labelled with its whole value."""
    assert axis.tickmode == "array" and axis.tickvals and len(axis.tickvals) == len(axis.ticktext)
    for value, text in zip(axis.tickvals, axis.ticktext, strict=True):
        assert float(text) == pytest.approx(value), (value, text)


def _assert_every_marker_named(fig) -> None:
    """A trace drawing markers is in the legend, or carries its own text labels (ridge points, node ids)."""
    for trace in fig.data:
        mode = getattr(trace, "mode", None) or ""
        if "markers" not in mode:
            continue
        named = trace.showlegend is not False and fig.layout.showlegend is not False
        assert named or "text" in mode, f"trace {trace.name!r} draws markers no legend names"


def test_log_ticks_write_every_label_in_full():
    wide = log_ticks([0.002, 40.0])  # over 2.5 decades: powers of ten only
    assert wide["ticktext"] == ["0.001", "0.01", "0.1", "1", "10"]
    middle = log_ticks([2.0, 90.0])  # fewer decades: 1-2-5 steps
    assert middle["ticktext"] == ["1", "2", "5", "10", "20", "50", "100"]
    narrow = log_ticks([31.0, 78.0])  # under a decade: evenly spaced, as plotly itself would, but written out
    assert narrow["ticktext"] == ["20", "40", "60", "80", "100"]
    assert log_ticks([1e-6, 1e-3])["ticktext"] == ["1e-6", "1e-5", "0.0001", "0.001"]
    assert log_ticks([None, float("nan"), 0.0]) == {}
    for ticks in (wide, middle, narrow):
        assert all(float(t) == pytest.approx(v) for t, v in zip(ticks["ticktext"], ticks["tickvals"], strict=True))


def test_variants_time_axis_labels_300_ms_as_300():
    from widgets._records import to_records
    from widgets.variants import VariantComparison, series_figure, variant_series

    results = [_result(name, ms, n) for name, scale in (("v1", 1.0), ("v2", 0.5))
               for n, ms in ((1024, 3.0 * scale), (4096, 30.0 * scale), (16384, 300.0 * scale))]
    fig = series_figure(variant_series(to_records(results), "time"), "time")
    assert fig.layout.yaxis.type == "log"
    _assert_full_labels(fig.layout.yaxis)
    assert "100" in fig.layout.yaxis.ticktext and "3" not in fig.layout.yaxis.ticktext
    _assert_every_marker_named(fig)
    assert all(t.showlegend for t in fig.data)  # a one-line figure keeps its legend too
    single = series_figure(variant_series(to_records(results[:3]), "time"), "time")
    assert [t.showlegend for t in single.data] == [True]
    view = VariantComparison(results)  # the live figure: a linear metric drops the log ticks again
    _assert_full_labels(view.figure.layout.yaxis)
    view.metric = "GB/s"
    assert view.figure.layout.yaxis.type == "linear" and view.figure.layout.yaxis.tickvals is None
    view.metric = "time"
    _assert_full_labels(view.figure.layout.yaxis)


def _sweep_store(path: Path) -> list[dict]:
    """A block-size study's results: BLOCK x NUM_WARPS at one size, as its notebook stores them."""
    from widgets.report_data import records

    point = {"task_name": "softmax", "template": "candidates/softmax/online.py", "size": {"batch_size": 4, "dim": 200}}
    with Store(path) as store:
        for block, warps, ms in ((64, 1, 60.0), (64, 4, 70.0), (128, 1, 38.0), (128, 4, 15.0), (256, 1, 3.5),
                                 (256, 4, 1.4)):
            store.add(Result(task="softmax", candidate_id=f"c{block}{warps}", language="triton", status="ok",
                             candidate_name=f"online[BLOCK={block},NUM_WARPS={warps}]", device="cpu",
                             size={"batch_size": 4, "dim": 200}, dtype="float32", flops=4000.0, bytes=6400.0,
                             timing=_timing(ms, "interpreter"),
                             metadata={"config": {"BLOCK": block, "NUM_WARPS": warps}, "parameters": point}),
                      run_id="bs")
    return records(Store(path).frame(run_id="bs"))


def test_study_report_time_by_block_names_every_dot(tmp_path):
    """The CI bands are fills without vertex dots; each line with its dots is in the legend; the time axis is
    labelled in full."""
    from widgets.report_params import task_figures

    lines = task_figures("softmax", _sweep_store(tmp_path / "bs.db"))[0]
    assert lines.layout.title.text.startswith("softmax: median time by BLOCK")
    bands = [t for t in lines.data if t.fill == "toself"]
    assert len(bands) == 2 and all(t.mode == "lines" for t in bands)  # no default markers on the band polygon
    medians = [t for t in lines.data if t.mode == "lines+markers"]
    assert [t.name for t in medians] == ["NUM_WARPS=1", "NUM_WARPS=4"] and all(t.showlegend for t in medians)
    assert len(bands) + len(medians) == len(lines.data)
    _assert_every_marker_named(lines)
    _assert_full_labels(lines.layout.yaxis)
    assert lines.layout.yaxis.ticktext[0] != "1" or lines.layout.yaxis.tickvals[0] == 1


def test_report_time_and_glance_figures_label_log_axes_in_full():
    from widgets.report_figures import time_figure
    from widgets.report_params import glance_figure

    rows = []
    for name, scale in (("fused", 1.0), ("online", 1.3)):
        for n, ms in ((64, 0.02), (4096, 0.9), (262144, 40.0)):
            rows.append({"status": "ok", "candidate_name": name, "size": {"n": n}, "clock": "cuda-events",
                         "dtype": "float32", "device": "cuda", "time_median_ms": ms * scale,
                         "time_ci95_low_ms": ms * scale * 0.9, "time_ci95_high_ms": ms * scale * 1.1, "task": "t"})
    fig = time_figure("t", rows)
    _assert_full_labels(fig.layout.yaxis)
    assert math.log10(fig.layout.yaxis.tickvals[1] / fig.layout.yaxis.tickvals[0]) == pytest.approx(1)  # decades
    _assert_every_marker_named(fig)
    bars = glance_figure([{**r, "task": r["candidate_name"]} for r in rows if r["size"] == {"n": 64}], "cuda-events")
    _assert_full_labels(bars.layout.yaxis)


def test_roofline_axes_tick_at_powers_of_ten_only():
    from roofline.plot import projection_figure, roofline_figure
    from roofline.specs import get_spec

    results = [_result("a", 0.05, 1 << 20, device_name="NVIDIA H100 80GB HBM3")]
    for fig in (roofline_figure(results, spec=get_spec("H100 SXM")), projection_figure(results, "H100 SXM")[0]):
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            assert axis.type == "log" and axis.tickvals and len(axis.tickvals) == len(axis.ticktext)
            assert all(math.log10(v) == pytest.approx(round(math.log10(v))) for v in axis.tickvals)
        _assert_every_marker_named(fig)

