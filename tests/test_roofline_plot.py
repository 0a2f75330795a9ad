"""The plotly roofline: log axes with device units, labelled roofs per dtype (datasheet dashed, measured solid),
ridge points, one point per result timed on the roofs' hardware (others left out with a reason), hover
text, an empty state, FigureWidget live updates, and store frames as input."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

import workbench as wb  # noqa: E402
from roofline.ceilings import Ceilings  # noqa: E402
from roofline.plot import POINTS, Roofs, add_points, fmt_rate, point_rows, roofline_figure, split_points  # noqa: E402
from roofline.specs import get_spec  # noqa: E402
from workbench.result import Result, Timing  # noqa: E402

H100 = get_spec("H100 SXM")
MEASURED = Ceilings("NVIDIA H100 80GB HBM3", 3.02e12, {"fp32": 52e12, "fp16": 668e12, "bf16": 687e12}, device="cuda")
CPU = Ceilings("cpu (x86_64)", 2.0e10, {"fp32": 1.5e11}, device="cpu")


def result(name: str, ms: float, flops: float = 5 * 8192 * 8192, nbytes: float = 2 * 8192 * 8192 * 4,
           clock: str = "cuda-events", flags: list[str] | None = None, sol: float | None = 0.5,
           device: str = "cuda", device_name: str = "NVIDIA H100 80GB HBM3") -> Result:
    t = Timing(ms, ms, ms, 0.0, ms, ms, 100, clock)
    return Result(task="softmax", candidate_id=name, candidate_name=name, language="triton",
                  status="rejected" if flags else "ok", flags=list(flags or []), size={"batch_size": 8192, "dim": 8192},
                  dtype="float32", device=device, device_name=device_name, timing=t, flops=flops, bytes=nbytes,
                  sol_fraction=sol, bound="memory")


def traces(fig, mode):
    return [t for t in fig.data if t.mode == mode]


def labels(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations]


def test_roofs_are_labelled_with_values_and_origin_and_ridges_are_marked():
    fig = roofline_figure([result("a", 0.32)], spec=H100, ceilings=MEASURED, dtypes=("fp32", "fp16"))
    roofs = {t.name: t for t in traces(fig, "lines")}
    assert set(roofs) == {"FP32 67 TFLOP/s (datasheet)", "FP16 tensor 989 TFLOP/s (datasheet)",
                          "FP32 52 TFLOP/s (measured)", "FP16 tensor 668 TFLOP/s (measured)"}
    assert roofs["FP16 tensor 989 TFLOP/s (datasheet)"].line.dash == "dash"
    assert roofs["FP16 tensor 668 TFLOP/s (measured)"].line.dash == "solid"
    fp16 = roofs["FP16 tensor 989 TFLOP/s (datasheet)"]
    ridge = 989.4e12 / 3.35e12
    assert list(fp16.x)[1] == pytest.approx(ridge) and list(fp16.y)[1] == pytest.approx(989.4e12)
    assert list(fp16.y)[0] == pytest.approx(list(fp16.x)[0] * 3.35e12)  # memory slope below the ridge
    assert list(fp16.y)[2] == pytest.approx(989.4e12)  # flat compute roof above it
    ridges = traces(fig, "markers+text")
    assert len(ridges) == 2 and pytest.approx(ridge) in list(ridges[0].x) and "ridge 295" in list(ridges[0].text)
    text = labels(fig)
    assert "HBM 3.35 TB/s (datasheet)" in text and "HBM 3.02 TB/s (measured)" in text
    assert "FP16 tensor 989 TFLOP/s (datasheet)" in text and "FP32 52 TFLOP/s (measured)" in text
    assert "bf16" not in " ".join(t.name for t in fig.data).lower()  # only the dtypes asked for
    assert fig.layout.title.text == "Roofline: H100 SXM (datasheet) vs NVIDIA H100 80GB HBM3 (measured)"


def test_axes_read_in_device_units_not_si_suffixes():
    fig = roofline_figure([], spec=H100)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.title.text == "arithmetic intensity (FLOP/byte)"
    assert fig.layout.yaxis.title.text == "performance (TFLOP/s)"
    y_text = list(fig.layout.yaxis.ticktext)
    assert "1000" in y_text and "1" in y_text and not any("B" in t or "T" in t for t in y_text)
    assert list(fig.layout.yaxis.tickvals)[y_text.index("1")] == pytest.approx(1e12)  # 1 TFLOP/s
    assert {"0.1", "1", "10", "100", "1000"} <= set(fig.layout.xaxis.ticktext)
    cpu = roofline_figure([], ceilings=CPU, dtypes=("fp32",))
    assert cpu.layout.yaxis.title.text == "performance (GFLOP/s)"
    assert "DRAM 20 GB/s (measured)" in labels(cpu) and "FP32 matmul 150 GFLOP/s (measured)" in labels(cpu)
    assert fmt_rate(3.02e12, "B/s") == "3.02 TB/s" and fmt_rate(9.894e14, "FLOP/s") == "989 TFLOP/s"


def test_empty_state_says_what_to_do():
    assert "no GPU results yet: run a kernel on a GPU" in labels(roofline_figure([], spec=H100))
    cpu_only = roofline_figure([result("interp", 1.0, clock="interpreter", device="cpu")], spec=H100)
    assert "no GPU results yet: run a kernel on a GPU" in labels(cpu_only)
    assert any(t.startswith("no CPU wall-clock results yet") for t in labels(roofline_figure([], ceilings=CPU)))
    assert not any("no GPU" in t for t in labels(roofline_figure([result("a", 0.3)], spec=H100)))


def test_points_carry_hover_text_and_flags():
    ok, cheat = result("fast_softmax", 0.32), result("cached", 0.002, flags=["faster-than-physics"], sol=80.0)
    fig = roofline_figure([ok, cheat], spec=H100)
    (points,) = traces(fig, "markers")
    assert points.name == POINTS and list(points.x) == [pytest.approx(5 / 8)] * 2
    assert list(points.y) == [pytest.approx(5 * 8192 * 8192 / 0.32e-3), pytest.approx(5 * 8192 * 8192 / 0.002e-3)]
    assert "<b>fast_softmax</b> (softmax)" in points.text[0] and "SOL 50.0%" in points.text[0]
    assert "batch_size=8192" in points.text[0] and "0.32 ms" in points.text[0] and "memory-bound" in points.text[0]
    assert "TFLOP/s" in points.text[0] and "TB/s" in points.text[0]
    assert "flags: faster-than-physics" in points.text[1] and "SOL 8000.0%" in points.text[1]
    assert list(points.marker.symbol) == ["circle", "x"]


def test_only_results_from_the_roofs_hardware_are_points():
    hw = result("hw", 1.0)
    interp = result("interp", 1.0, clock="interpreter", device="cpu", device_name="cpu")
    cpu_wall = result("cpu-wall", 1.0, clock="wall", device="cpu", device_name="cpu (x86_64)")
    a100 = result("a100", 1.0, device_name="NVIDIA A100-SXM4-80GB")
    rows = [hw, interp, cpu_wall, a100, result("nobytes", 1.0, nbytes=0),
            {"candidate_name": "nan-time", "flops": 1.0, "bytes": 1.0, "time_median_ms": float("nan")}]
    drawn, left = split_points(rows, [Roofs(H100)])
    assert [r["name"] for r in drawn] == ["hw"]
    assert {r["name"]: r["reason"] for r in left} == {
        "interp": "Triton interpreter time: not hardware", "cpu-wall": "ran on cpu (x86_64), not on this GPU",
        "a100": "ran on NVIDIA A100-SXM4-80GB, not on H100 SXM", "nobytes": "no FLOP/byte count",
        "nan-time": "not timed (no time)"}
    assert [r["name"] for r in split_points(rows, [Roofs(CPU)])[0]] == ["cpu-wall"]  # CPU roofs: CPU wall clock
    assert [r["name"] for r in point_rows(rows)] == ["hw", "cpu-wall", "a100"]  # no roofs: any hardware time
    fig = roofline_figure(rows, spec=H100)
    (points,) = traces(fig, "markers")
    assert len(points.x) == 1


def test_widget_updates_in_place_and_grows_its_axes():
    w = roofline_figure([], spec=H100, ceilings=MEASURED, as_widget=True)
    assert type(w).__name__ == "FigureWidget" and w._config["displayModeBar"] == "hover"
    (points,) = traces(w, "markers")
    assert len(points.x) == 0
    with w.batch_update():
        add_points(w, [result("a", 0.4), result("b", 0.5)])
    add_points(w, [result("c", 0.6, flags=["stale-memory"])])
    (points,) = traces(w, "markers")
    assert len(points.x) == 3 and list(points.marker.symbol) == ["circle", "circle", "x"]
    assert "<b>c</b> (softmax)" in points.text[2] and "stale-memory" in points.text[2]
    assert not any("no GPU" in t for t in labels(w))  # the empty-state note leaves with the first point
    top = w.layout.yaxis.range[1]
    add_points(w, [result("impossible", 1e-6)])  # far above every roof: the axis grows to keep it in view
    assert w.layout.yaxis.range[1] > top and 10 ** w.layout.yaxis.range[1] > 5 * 8192 * 8192 / 1e-9
    bare = roofline_figure([], spec=None)
    bare.data = ()
    add_points(bare, [result("d", 0.4)])  # no point trace yet: one is created
    assert len(traces(bare, "markers")) == 1


def test_store_frame_is_plotted_like_results(tmp_path):
    store = wb.Store(tmp_path / "results.db")
    store.add(result("stored_a", 0.3))
    store.add(result("stored_b", 0.6, flags=["no-custom-kernel"]))
    store.add(result("interp", 1.0, clock="interpreter", device="cpu"))
    frame = store.frame()
    fig = roofline_figure(frame, spec=H100)
    (points,) = traces(fig, "markers")
    assert len(points.x) == 2 and any("stored_b" in t and "no-custom-kernel" in t for t in points.text)
    assert "batch_size=8192" in points.text[0]
