"""Roofline: specs, counting against hand formulas, SOL arithmetic, faster-than-physics, plots, ceilings cache."""

from __future__ import annotations

import pytest

import roofline
import workbench as wb
from roofline.counting import count, count_reference
from roofline.ncu import parse_csv
from roofline.sol import annotate_result
from roofline.specs import get_spec, match_device_name
from workbench.result import Result, Timing


def test_device_names_map_to_table_entries():
    assert match_device_name("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert match_device_name("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert match_device_name("NVIDIA H200").name == "H200"
    assert match_device_name("NVIDIA A100-SXM4-80GB").name == "A100 SXM 80GB"
    assert match_device_name("NVIDIA GeForce RTX 4090").name == "RTX 4090"
    assert match_device_name("AMD Instinct MI300X").name == "MI300X"
    assert match_device_name("Some Future GPU") is None
    for name in ("H100 SXM", "H100 PCIe", "H200", "A100 SXM 80GB", "L4", "L40S", "RTX 4090", "B200", "MI300X"):
        spec = get_spec(name)
        assert spec.peak("float16") > spec.peak("float32") > 0 and spec.memory_bandwidth > 1e11
    h100 = get_spec("H100 SXM")
    assert h100.ridge("float16") == pytest.approx(989.4e12 / 3.35e12)
    with pytest.raises(wb.UnknownNameError, match="H100 SXM"):
        get_spec("nonexistent")


@pytest.mark.parametrize("name", wb.tasks())
def test_task_bytes_formula_equals_inputs_plus_outputs_of_the_reference(name):
    task = wb.get_task(name)
    for size in [task.size("cpu"), task.size("gpu")]:
        counted = count_reference(task, size)
        assert task.bytes(size) == counted.bytes, size


def test_flop_formulas_match_hand_counts_and_the_torch_counter():
    mm = wb.get_task("matmul")
    assert mm.flops({"M": 64, "N": 32, "K": 16}) == 2 * 64 * 32 * 16
    assert count_reference(mm, {"M": 64, "N": 32, "K": 16}).flops == 2 * 64 * 32 * 16
    conv = wb.get_task("conv2d")
    size = conv.size("cpu")
    counted = count_reference(conv, size).flops
    # The formula counts MACs x 2 plus the bias add; torch's counter differs by the bias term only.
    assert conv.flops(size) == pytest.approx(counted, rel=0.02)
    sm = wb.get_task("softmax")
    assert sm.flops({"batch_size": 4, "dim": 10}) == 5 * 4 * 10
    assert sm.bytes({"batch_size": 4, "dim": 10}) == 2 * 4 * 10 * 4
    va = wb.get_task("vector_add")
    assert va.bytes({"n": 100}) == 3 * 100 * 4 and va.flops({"n": 100}) == 100
    ln = wb.get_task("layernorm")
    w = count(ln, "cpu")
    assert w.source == "task" and w.intensity == pytest.approx(w.flops / w.bytes)
    # Causal attention counts only the useful half; the reference computes the full matrix.
    att = wb.get_task("attention")
    s = att.size("cpu")
    assert att.flops(s) < count_reference(att, s).flops




def _result(median_ms: float, clock: str = "cuda-events") -> Result:
    t = Timing(median_ms, median_ms, median_ms, 0.0, median_ms, median_ms, 50, clock)
    ref = Timing(1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 50, clock)
    return Result(task="softmax", candidate_id="c", candidate_name="c", language="triton", status="ok",
                  size={"batch_size": 8192, "dim": 8192}, dtype="float32", device="cuda",
                  device_name="NVIDIA H100 80GB HBM3", timing=t, reference_timing=ref)




def test_roofline_figure_structure():
    pytest.importorskip("plotly")
    task = wb.get_task("softmax")
    results = [annotate_result(_result(0.3), task), annotate_result(_result(0.5), task)]
    fig = roofline.plot.roofline_figure(results, spec=get_spec("H100 SXM"), dtypes=("fp32", "fp16"))
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    roofs = [t for t in fig.data if t.mode == "lines"]
    assert len(roofs) == 2 and all(t.line.dash == "dash" for t in roofs)
    points = [t for t in fig.data if t.mode == "markers"][0]
    assert len(points.x) == 2 and "SOL" in points.text[0] and "%" in points.text[0]
    roofline.plot.add_points(fig, [annotate_result(_result(0.4), task)])
    assert len([t for t in fig.data if t.mode == "markers"][0].x) == 3
    widget = roofline.plot.roofline_figure(results, spec=get_spec("H100 SXM"), as_widget=True)
    assert type(widget).__name__ == "FigureWidget"


def test_ceilings_are_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))
    first = roofline.ceilings.get_ceilings("cpu")
    assert first.copy_bandwidth > 1e8 and first.matmul_flops["fp32"] > 1e8
    files = list((tmp_path / "ceilings").glob("*.json"))
    assert len(files) == 1
    again = roofline.ceilings.get_ceilings("cpu")
    assert again == first


NCU_SAMPLE = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","h","softmax_kernel","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","Gbyte","0.54"
"0","123","python3","h","softmax_kernel","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","185500"
"0","123","python3","h","softmax_kernel","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","inst","1,000"
"0","123","python3","h","softmax_kernel","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","sm__sass_thread_inst_executed_op_fadd_pred_on.sum","inst","500"
'''


def test_ncu_csv_parser_reads_bytes_time_and_flops():
    (k,) = parse_csv(NCU_SAMPLE)
    assert k.name == "softmax_kernel"
    assert k.dram_bytes == pytest.approx(0.54e9) and k.seconds == pytest.approx(185.5e-6)
    assert k.fp_ops == 2 * 1000 + 500
