"""Floors that bound (issue 22): on the CPU the physics floor counts the working set's bytes at the bandwidth of the
cache level it fits in, and every built-in task declares `min_flops`, so no CPU-sized task has a floor of 0 and a
time 10x under the floor is `faster-than-physics` whatever clock measured it."""

from __future__ import annotations

import pytest

import workbench as wb
from roofline.ceilings import Ceilings, cpu_cache_levels
from roofline.sol import (
    CPU_BYTES_PER_CYCLE,
    CPU_CLOCK_HZ,
    CPU_PHYSICS_MARGIN,
    Roof,
    annotate_result,
    cpu_cache_roofs,
    faster_than_physics,
    physics_floor,
    roof_for,
    sol,
)
from workbench.result import Result, Timing
from workbench.tasks import BUILTIN

LEVELS = (("L1", 32 << 10, 1.6e12), ("L2", 1 << 20, 0.8e12), ("L3", 32 << 20, 0.4e12))


def test_the_physics_floor_moves_the_working_set_at_the_bandwidth_of_the_level_it_fits_in():
    roof = Roof("cpu", peak_flops=1e11, bandwidth=1e10, source="measured", limit_bandwidth=2e10, cache_levels=LEVELS)
    for nbytes, level, bandwidth in [(16 << 10, "L1", 1.6e12), (32 << 10, "L1", 1.6e12), (512 << 10, "L2", 0.8e12),
                                     (8 << 20, "L3", 0.4e12), (64 << 20, "memory", 2e10)]:
        point = sol(None, nbytes, 1.0, roof)
        assert point.physics_level == level and point.physics_floor_s == pytest.approx(nbytes / bandwidth)
    # A level is never slower than memory, and min_flops still sets the floor where it is the larger term.
    slow = Roof("cpu", 1e11, 1e10, "measured", limit_bandwidth=2e10, cache_levels=(("L1", 1 << 20, 1e9),))
    assert physics_floor(None, 1 << 20, slow) == pytest.approx((1 << 20) / 2e10)
    assert physics_floor(1e9, 16 << 10, roof) == pytest.approx(1e9 / 1e11)


def test_cpu_cache_roofs_are_per_core_upper_bounds_at_the_highest_clock():
    roofs = cpu_cache_roofs({"cache_levels": [[2, 2 << 20], [1, 48 << 10], [3, 96 << 20]], "max_clock_hz": 7e9})
    assert [(name, size) for name, size, _ in roofs] == [("L1", 48 << 10), ("L2", 2 << 20), ("L3", 96 << 20)]
    assert roofs[0][2] == pytest.approx(CPU_BYTES_PER_CYCLE[1] * 7.7e9)  # 1.1 x the clock a core reports
    slow_clock = cpu_cache_roofs({"cache_levels": [[1, 32 << 10]], "max_clock_hz": 2e9})
    assert slow_clock[0][2] == pytest.approx(CPU_BYTES_PER_CYCLE[1] * CPU_CLOCK_HZ)  # never below CPU_CLOCK_HZ
    # This machine's levels (sysfs), smallest first, data caches only.
    levels = cpu_cache_levels()
    assert levels == sorted(levels) and all(size > 0 for _, size in levels) and levels[0][0] == 1
    roof = roof_for(Ceilings("cpu: t", 1e10, {"fp32": 1e11}, device="cpu", details={"cache_levels": levels}), "fp32")
    assert [name for name, _, _ in roof.cache_levels] == [f"L{lvl}" for lvl, _ in levels]
    assert roof.margin == CPU_PHYSICS_MARGIN


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_task_declares_a_true_lower_bound_on_its_flops(name):
    task = wb.get_task(name)
    assert task.min_flops is not None, f"{name} declares no min_flops"
    sizes = [task.size(None, dev) for dev in ("cpu", "cuda")] + [s for pts in task.sweep.values() for s in pts]
    for size in sizes:
        low, count = task.min_flops(size), task.flops(size)
        assert 0 < low <= count, (name, size, low, count)  # the reference's own count is never below the bound


def _wall(ms: float, size: dict, task: wb.Task) -> Result:
    t = Timing(median_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, ci95_low_ms=ms, ci95_high_ms=ms, n=20, clock="wall")
    return Result(task=task.name, candidate_id="c", candidate_name="c", language="torch", status="ok",
                  message="all checks passed", size=size, dtype="float32", device="cpu", device_name="cpu",
                  timing=t)


@pytest.mark.parametrize("name", BUILTIN)
def test_no_cpu_sized_builtin_task_has_a_zero_floor_and_ten_times_under_it_is_rejected(name):
    # Measured ceilings of a modest core; the cache levels of a common server part.
    ceilings = Ceilings("cpu: test", copy_bandwidth=10e9, matmul_flops={"fp32": 50e9, "fp64": 25e9}, device="cpu",
                        details={"cache_levels": [[1, 32 << 10], [2, 1 << 20], [3, 32 << 20]], "max_clock_hz": 3e9})
    task = wb.get_task(name)
    size = task.size(None, "cpu")
    probe = annotate_result(_wall(1e3, size, task), task, ceilings=ceilings)
    floor_ms = probe.metadata["physics_floor_ms"]
    assert floor_ms > 0, name
    assert faster_than_physics(_wall(floor_ms * 0.6, size, task), task, ceilings=ceilings) == ""
    assert faster_than_physics(_wall(floor_ms / 10, size, task), task, ceilings=ceilings), name


def test_min_flops_is_what_rejects_a_matmul_time_the_bytes_alone_would_allow():
    import dataclasses

    task = wb.get_task("matmul")
    size = {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}

    def timed(ms: float) -> Result:
        t = Timing(median_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, ci95_low_ms=ms, ci95_high_ms=ms, n=100,
                   clock="cuda-events")
        return Result(task="matmul", candidate_id="c", candidate_name="c", language="triton", status="ok",
                      message="all checks passed", size=size, dtype="float16", device="cuda",
                      device_name="NVIDIA H100 80GB HBM3", timing=t)

    # On an H100 the bytes take >= 0.030 ms, half the classical FLOPs at the dense fp16 peak >= 0.035 ms.
    assert faster_than_physics(timed(0.029), task)
    assert annotate_result(timed(0.029), task).metadata["min_flops"] == pytest.approx(4096**3 / 2)
    assert faster_than_physics(timed(0.029), dataclasses.replace(task, min_flops=None)) == ""
    assert faster_than_physics(timed(0.05), task) == ""
