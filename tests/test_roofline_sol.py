"""Speed-of-light arithmetic on constructed numbers, the SOL-ExecBench score, faster-than-physics, and
annotate_result on GPU, CPU and interpreter results."""

from __future__ import annotations

import os
import textwrap

import pytest

import workbench as wb
from roofline.ceilings import Ceilings
from roofline.sol import (
    CPU_PHYSICS_MARGIN,
    MEASURED_HEADROOM,
    PHYSICS_MARGIN,
    Roof,
    annotate_result,
    faster_than_physics,
    gap_closed,
    roof_for,
    sol,
    sol_score,
)
from roofline.specs import get_spec
from workbench.result import Result, Timing

H100 = "NVIDIA H100 80GB HBM3"

ROWS = textwrap.dedent('''
    import torch
    import torch.nn as nn

    rows = 1024
    cols = 1024
    dtype = torch.float32


    class Model(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)


    def get_inputs():
        return [torch.randn(rows, cols, dtype=dtype)]


    def get_init_inputs():
        return []
''')

SIZE = {"rows": 8192, "cols": 8192}
BYTES = 2 * 8192 * 8192 * 4  # read x, write y: 536,870,912
FLOPS = 5 * 8192 * 8192


def softmax_task(**kw) -> wb.Task:
    kw.setdefault("flops", lambda s: 5 * s["rows"] * s["cols"])
    kw.setdefault("bytes", lambda s: 2 * s["rows"] * s["cols"] * 4)
    return wb.Task.from_source(ROWS, name="rows_softmax", **kw)


def timing(ms: float, clock: str = "cuda-events") -> Timing:
    return Timing(median_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, ci95_low_ms=ms, ci95_high_ms=ms, n=100, clock=clock)


def result(ms: float, clock: str = "cuda-events", device: str = "cuda", device_name: str = H100, ref_ms: float | None = 1.0,
           status: str = "ok", size: dict | None = None, dtype: str = "float32", **kw) -> Result:
    return Result(task="rows_softmax", candidate_id="c1", candidate_name="cand", language="triton", status=status,
                  message="all checks passed", size=dict(size or SIZE), dtype=dtype, device=device,
                  device_name=device_name, timing=timing(ms, clock),
                  reference_timing=timing(ref_ms, "wall" if clock == "interpreter" else clock) if ref_ms else None,
                  **kw)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("kwb_cache")
    old = os.environ.get("KWB_CACHE_DIR")
    os.environ["KWB_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KWB_CACHE_DIR", None)
    else:
        os.environ["KWB_CACHE_DIR"] = old


# ---- the arithmetic --------------------------------------------------------------------------------------

def test_floor_fraction_bound_and_rates_on_constructed_numbers():
    roof = Roof("toy", peak_flops=100e12, bandwidth=1e12, source="datasheet")
    mem = sol(flops=1e9, nbytes=1e9, seconds=2e-3, roof=roof)  # memory 1 ms, compute 0.01 ms
    assert mem.floor_s == pytest.approx(1e-3) and mem.bound == "memory" and mem.fraction == pytest.approx(0.5)
    assert mem.memory_s == pytest.approx(1e-3) and mem.compute_s == pytest.approx(1e-5)
    assert mem.achieved_bytes_per_s == pytest.approx(0.5e12) and mem.achieved_flops_per_s == pytest.approx(0.5e12)
    assert mem.intensity == pytest.approx(1.0) and not mem.faster_than_physics
    comp = sol(flops=1e12, nbytes=1e6, seconds=0.02, roof=roof)  # compute 10 ms, memory 1 us
    assert comp.bound == "compute" and comp.floor_s == pytest.approx(0.01) and comp.fraction == pytest.approx(0.5)
    assert comp.intensity == pytest.approx(1e6)
    ridge = sol(flops=100e9, nbytes=1e9, seconds=1e-3, roof=roof)  # both terms 1 ms: at the ridge
    assert ridge.fraction == pytest.approx(1.0) and ridge.bound == "memory"
    untimed = sol(1e9, 1e9, None, roof)
    assert untimed.fraction is None and untimed.floor_s == pytest.approx(1e-3)
    no_flops = sol(None, 1e9, 4e-3, roof)
    assert no_flops.intensity is None and no_flops.fraction == pytest.approx(0.25) and no_flops.achieved_flops_per_s is None


def test_sol_score_is_the_sol_execbench_formula():
    # S = 1 / (1 + (t - floor) / (t_ref - floor)): 1 at the floor, 0.5 at the baseline, -> 0 when slower.
    assert sol_score(t_ref=3.0, t_cand=1.0, floor=1.0) == 1.0
    assert sol_score(t_ref=3.0, t_cand=3.0, floor=1.0) == pytest.approx(0.5)
    assert sol_score(t_ref=3.0, t_cand=2.0, floor=1.0) == pytest.approx(2 / 3)
    assert sol_score(t_ref=3.0, t_cand=5.0, floor=1.0) == pytest.approx(1 / 3)
    assert sol_score(t_ref=3.0, t_cand=0.5, floor=1.0) == 1.0  # below the floor: clipped (and flagged elsewhere)
    assert sol_score(t_ref=1.0, t_cand=1.0, floor=1.0) == 1.0 and sol_score(1.0, 1.5, 1.0) == 0.0  # degenerate
    assert sol_score(None, 2.0, 1.0) is None and sol_score(3.0, 0.0, 1.0) is None
    assert gap_closed(3.0, 2.0, 1.0) == pytest.approx(0.5) and gap_closed(3.0, 4.0, 1.0) == pytest.approx(-0.5)


def test_faster_than_physics_at_the_margin():
    roof = Roof("toy", 100e12, 1e12, "datasheet")  # floor of 1e9 bytes: 1 ms
    assert not sol(1e9, 1e9, 1e-3 * PHYSICS_MARGIN * 1.001, roof).faster_than_physics
    assert sol(1e9, 1e9, 1e-3 * PHYSICS_MARGIN * 0.999, roof).faster_than_physics
    # The physics floor may use more generous rates than the SOL floor.
    generous = Roof("toy", 100e12, 1e12, "measured", limit_flops=200e12, limit_bandwidth=2e12)
    point = sol(1e9, 1e9, 0.6e-3, generous)
    assert point.fraction == pytest.approx(1 / 0.6) and point.physics_floor_s == pytest.approx(0.5e-3)
    assert not point.faster_than_physics and sol(1e9, 1e9, 0.44e-3, generous).faster_than_physics


def test_fp32_physics_allows_tf32_tensor_cores_but_sol_uses_fp32():
    roof = roof_for(get_spec("H100 SXM"), "float32")
    assert roof.peak_flops == pytest.approx(67e12) and roof.limit_flops == pytest.approx(494.7e12)
    flops, nbytes = 2 * 4096**3, 3 * 4096 * 4096 * 4
    fast = sol(flops, nbytes, 1.0e-3, roof)  # 137 TFLOP/s: more than fp32 CUDA cores, fine with 3xTF32
    assert fast.bound == "compute" and fast.fraction == pytest.approx(flops / 67e12 / 1e-3)
    assert fast.fraction > 1 and not fast.faster_than_physics
    assert sol(flops, nbytes, 0.2e-3, roof, min_flops=flops).faster_than_physics  # 687 TFLOP/s of fp32: no


# ---- annotate_result -----------------------------------------------------------------------------------

def test_gpu_result_gets_sol_fields_from_the_datasheet():
    task = softmax_task()
    res = result(0.25, ref_ms=1.0)
    res.compiled_reference_timing = timing(0.5)
    assert annotate_result(res, task) is res
    floor_ms = BYTES / 3.35e12 * 1e3
    assert res.status == "ok" and res.flags == [] and res.bound == "memory"
    assert res.flops == FLOPS and res.bytes == BYTES
    assert res.sol_fraction == pytest.approx(floor_ms / 0.25)
    assert res.achieved_bytes_per_s == pytest.approx(BYTES / 0.25e-3)
    assert res.achieved_flops_per_s == pytest.approx(FLOPS / 0.25e-3)
    md = res.metadata
    assert md["roof"] == "H100 SXM" and md["roof_source"] == "datasheet" and md["work_source"] == "task"
    assert md["floor_ms"] == pytest.approx(floor_ms) and md["intensity"] == pytest.approx(FLOPS / BYTES)
    assert md["sol_score"] == pytest.approx(1 / (1 + (0.25 - floor_ms) / (1.0 - floor_ms)))
    assert md["sol_score_vs_compile"] == pytest.approx(1 / (1 + (0.25 - floor_ms) / (0.5 - floor_ms)))
    assert md["sol_gap_closed"] == pytest.approx((1.0 - 0.25) / (1.0 - floor_ms))
    assert md["reference_sol_fraction"] == pytest.approx(floor_ms / 1.0)


def test_faster_than_physics_names_the_floor_and_the_caller_keeps_the_status():
    """The physics check the judge decides with (`faster_than_physics`, judge/verdict.py); the caller's annotation
    adds numbers and leaves the status alone."""
    from workbench.eval.checks.flags import Finding
    from workbench.eval.judge.verdict import decide

    task = softmax_task()
    floor_ms = BYTES / 3.35e12 * 1e3  # 0.16 ms
    detail = faster_than_physics(result(floor_ms * 0.5), task)
    assert f"floor {floor_ms:.4g} ms on H100 SXM datasheet" in detail
    decision = decide([Finding("faster-than-physics", detail)])
    assert decision.status == "rejected" and decision.flags == ["faster-than-physics"]
    assert decision.message.startswith("[faster-than-physics]") and "Fix:" in decision.message
    annotated = annotate_result(result(floor_ms * 0.5), task)
    assert annotated.status == "ok" and annotated.flags == [] and annotated.sol_fraction > 1
    edge = result(floor_ms * PHYSICS_MARGIN * 1.01)
    assert faster_than_physics(edge, task) == "" and annotate_result(edge, task).sol_fraction > 1  # within margin


def test_interpreter_times_get_no_roofline():
    task = softmax_task()
    res = annotate_result(result(5.0, clock="interpreter", device="cpu", device_name=""), task)
    assert res.sol_fraction is None and res.bound is None and res.achieved_bytes_per_s is None
    assert res.flops == FLOPS and res.bytes == BYTES and "not hardware" in res.metadata["sol_note"]
    assert faster_than_physics(result(1e-9, clock="interpreter", device="cpu", device_name=""), task) == ""


def test_work_comes_from_formulas_then_the_worker_then_counting_here():
    counted = {"flops": 7.0, "bytes": 4096.0}
    assert annotate_result(result(1.0), softmax_task(), counted).bytes == BYTES  # the task's formula wins
    bare = wb.Task.from_source(ROWS, name="bare")
    res = annotate_result(result(1.0, size={"rows": 64, "cols": 64}), bare, counted)
    assert (res.flops, res.bytes, res.metadata["work_source"]) == (7.0, 4096.0, "counted")
    here = annotate_result(result(1.0, size={"rows": 64, "cols": 32}), bare)  # counted under FakeTensorMode
    assert here.bytes == 2 * 64 * 32 * 4 and here.metadata["work_source"] == "counted"
    mixed = annotate_result(result(1.0, size={"rows": 64, "cols": 32}), softmax_task(bytes=None), {"bytes": 99.0})
    assert mixed.bytes == 99.0 and mixed.metadata["work_source"] == "task+counted"


def test_measured_ceilings_set_sol_but_never_a_stricter_physics_check():
    task = softmax_task()
    measured = Ceilings(H100, copy_bandwidth=BYTES / 1e-3, matmul_flops={"fp32": 50e12}, device="cuda")
    res = annotate_result(result(0.85), task, ceilings=measured)  # measured floor 1 ms: SOL 1/0.85
    assert res.sol_fraction == pytest.approx(1 / 0.85) and res.metadata["roof_source"] == "measured"
    assert faster_than_physics(result(0.85), task, ceilings=measured) == ""  # datasheet floor 0.16 ms: possible
    # A GPU without a datasheet entry: measured roofs, with headroom for kernels that beat a copy.
    unknown = annotate_result(result(0.85, device_name="Future GPU"), task, ceilings=measured)
    assert unknown.metadata["roof"] == H100 and unknown.sol_fraction == pytest.approx(1 / 0.85)
    assert faster_than_physics(result(0.85, device_name="Future GPU"), task, ceilings=measured) == ""
    limit_ms = 1.0 / MEASURED_HEADROOM * PHYSICS_MARGIN
    assert faster_than_physics(result(limit_ms * 1.01, device_name="Future GPU"), task, ceilings=measured) == ""
    assert faster_than_physics(result(limit_ms * 0.99, device_name="Future GPU"), task, ceilings=measured)
    spec = annotate_result(result(0.25), task, ceilings=get_spec("H200"))
    assert spec.sol_fraction == pytest.approx(BYTES / 4.8e12 / 0.25e-3) and spec.metadata["roof"] == "H200"


def test_cpu_wall_clock_uses_measured_ceilings_with_cache_and_noise_allowances(cache):
    from roofline.sol import CPU_BYTES_PER_CYCLE, CPU_CLOCK_HZ

    task = softmax_task()
    cpu = Ceilings("cpu: test", copy_bandwidth=10e9, matmul_flops={"fp32": 100e9}, device="cpu",
                   details={"last_level_cache_bytes": 32 << 20, "cache_levels": [[1, 32 << 10], [2, 1 << 20],
                                                                                [3, 32 << 20]], "max_clock_hz": 3e9})
    small = {"rows": 256, "cols": 256}  # 512 KiB working set: may live in L2 on a CPU, which timing does not flush
    l2 = CPU_BYTES_PER_CYCLE[2] * CPU_CLOCK_HZ
    floor_small = 2 * 256 * 256 * 4 / l2 * 1e3
    cached = annotate_result(result(floor_small * 0.6, clock="wall", device="cpu", device_name="", size=small), task,
                             ceilings=cpu)
    assert cached.metadata["physics_level"] == "L2"
    assert faster_than_physics(result(floor_small * 0.6, clock="wall", device="cpu", device_name="", size=small), task,
                               ceilings=cpu) == ""
    assert cached.metadata["physics_floor_ms"] == pytest.approx(floor_small)
    forged = faster_than_physics(result(floor_small / 10, clock="wall", device="cpu", device_name="", size=small), task,
                                 ceilings=cpu)
    assert "bytes from L2" in forged  # 10x under the floor never passes
    floor_big = BYTES / 10e9 * 1e3  # 512 MiB: must stream from DRAM
    # 2x the measured copy rate: shared cores measure low, not a cheat
    assert faster_than_physics(result(floor_big * 0.5, clock="wall", device="cpu", device_name=""), task,
                               ceilings=cpu) == ""
    assert faster_than_physics(result(floor_big * CPU_PHYSICS_MARGIN * 0.5, clock="wall", device="cpu",
                                      device_name=""), task, ceilings=cpu)
    # Without explicit ceilings the CPU is measured (once, cached) and used.
    auto = annotate_result(result(1000.0, clock="wall", device="cpu", device_name=""), task)
    assert auto.metadata["roof_source"] == "measured" and auto.metadata["roof"].startswith("cpu: ")
    assert 0 < auto.sol_fraction < 1 and auto.bound == "memory"
