"""The plotly roofline: log axes, roofs per dtype (datasheet dashed, measured solid), ridge points, one point
per hardware-timed result with hover text, FigureWidget live updates, and store frames as input."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

import workbench as wb  # noqa: E402
from roofline.ceilings import Ceilings  # noqa: E402
from roofline.plot import POINTS, add_points, point_rows, roofline_figure  # noqa: E402
from roofline.specs import get_spec  # noqa: E402
from workbench.result import Result, Timing  # noqa: E402

H100 = get_spec("H100 SXM")
MEASURED = Ceilings("NVIDIA H100 80GB HBM3", 3.0e12, {"fp32": 52e12, "fp16": 668e12, "bf16": 687e12}, device="cuda")


def result(name: str, ms: float, flops: float = 5 * 8192 * 8192, nbytes: float = 2 * 8192 * 8192 * 4,
           clock: str = "cuda-events", flags: list[str] | None = None, sol: float | None = 0.5) -> Result:
    t = Timing(ms, ms, ms, 0.0, ms, ms, 100, clock)
    return Result(task="softmax", candidate_id=name, candidate_name=name, language="triton",
                  status="rejected" if flags else "ok", flags=list(flags or []), size={"batch_size": 8192, "dim": 8192},
                  dtype="float32", device="cuda", device_name="NVIDIA H100 80GB HBM3", timing=t, flops=flops,
                  bytes=nbytes, sol_fraction=sol, bound="memory")


def traces(fig, mode):
    return [t for t in fig.data if t.mode == mode]


def test_figure_has_log_axes_roofs_per_dtype_and_ridges():
    fig = roofline_figure([result("a", 0.32)], spec=H100, ceilings=MEASURED, dtypes=("fp32", "fp16"))
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "FLOP/byte" in fig.layout.xaxis.title.text and "FLOP/s" in fig.layout.yaxis.title.text
    roofs = {t.name: t for t in traces(fig, "lines")}
    assert set(roofs) == {"H100 SXM datasheet fp32", "H100 SXM datasheet fp16",
                          "NVIDIA H100 80GB HBM3 measured fp32", "NVIDIA H100 80GB HBM3 measured fp16"}
    assert roofs["H100 SXM datasheet fp16"].line.dash == "dash"
    assert roofs["NVIDIA H100 80GB HBM3 measured fp16"].line.dash == "solid"
    fp16 = roofs["H100 SXM datasheet fp16"]
    ridge = 989.4e12 / 3.35e12
    assert list(fp16.x)[1] == pytest.approx(ridge) and list(fp16.y)[1] == pytest.approx(989.4e12)
    assert list(fp16.y)[0] == pytest.approx(list(fp16.x)[0] * 3.35e12)  # memory slope below the ridge
    assert list(fp16.y)[2] == pytest.approx(989.4e12)  # flat compute roof above it
    ridges = traces(fig, "markers+text")
    assert len(ridges) == 2 and pytest.approx(ridge) in list(ridges[0].x)
    assert "bf16" not in " ".join(t.name for t in fig.data)  # only the dtypes asked for


def test_points_carry_hover_text_and_flags():
    ok, cheat = result("fast_softmax", 0.32), result("cached", 0.002, flags=["faster-than-physics"], sol=80.0)
    fig = roofline_figure([ok, cheat], spec=H100)
    (points,) = traces(fig, "markers")
    assert points.name == POINTS and list(points.x) == [pytest.approx(5 / 8)] * 2
    assert list(points.y) == [pytest.approx(5 * 8192 * 8192 / 0.32e-3), pytest.approx(5 * 8192 * 8192 / 0.002e-3)]
    assert "fast_softmax" in points.text[0] and "SOL 50.0%" in points.text[0] and "batch_size=8192" in points.text[0]
    assert "0.32 ms" in points.text[0] and "memory-bound" in points.text[0]
    assert "flags: faster-than-physics" in points.text[1] and "SOL 8000.0%" in points.text[1]
    assert list(points.marker.symbol) == ["circle", "x"]


def test_interpreter_and_uncounted_results_are_not_points():
    rows = point_rows([result("hw", 1.0), result("interp", 1.0, clock="interpreter"), result("nobytes", 1.0, nbytes=0),
                       {"candidate_name": "nan-time", "flops": 1.0, "bytes": 1.0, "time_median_ms": float("nan")}])
    assert [r["name"] for r in rows] == ["hw"]


def test_widget_updates_in_place():
    w = roofline_figure([], spec=H100, ceilings=MEASURED, as_widget=True)
    assert type(w).__name__ == "FigureWidget"
    (points,) = traces(w, "markers")
    assert len(points.x) == 0
    with w.batch_update():
        add_points(w, [result("a", 0.4), result("b", 0.5)])
    add_points(w, [result("c", 0.6, flags=["stale-memory"])])
    (points,) = traces(w, "markers")
    assert len(points.x) == 3 and list(points.marker.symbol) == ["circle", "circle", "x"]
    assert "<b>c</b> (softmax)" in points.text[2] and "stale-memory" in points.text[2]
    bare = roofline_figure([], spec=None)
    bare.data = ()
    add_points(bare, [result("d", 0.4)])  # no point trace yet: one is created
    assert len(traces(bare, "markers")) == 1


def test_store_frame_is_plotted_like_results(tmp_path):
    store = wb.Store(tmp_path / "results.db")
    store.add(result("stored_a", 0.3))
    store.add(result("stored_b", 0.6, flags=["no-custom-kernel"]))
    store.add(result("interp", 1.0, clock="interpreter"))
    frame = store.frame()
    fig = roofline_figure(frame, spec=H100)
    (points,) = traces(fig, "markers")
    assert len(points.x) == 2 and any("stored_b" in t and "no-custom-kernel" in t for t in points.text)
    assert "batch_size=8192" in points.text[0]
