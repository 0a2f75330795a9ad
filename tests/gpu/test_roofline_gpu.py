"""Roofline on a real GPU: measured ceilings are sane against the datasheet, SOL is filled for GPU results."""

from __future__ import annotations

import pytest

import roofline
import workbench as wb

pytestmark = pytest.mark.gpu


def test_measured_ceilings_are_a_sane_share_of_the_datasheet(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))
    c = roofline.ceilings.get_ceilings("cuda")
    spec = roofline.specs.detect("cuda")
    print(f"\n{c.device_name}: copy {c.copy_bandwidth / 1e12:.2f} TB/s (datasheet {spec.memory_bandwidth / 1e12:.2f}); "
          + ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in c.matmul_flops.items()))
    assert 0.5 < c.copy_bandwidth / spec.memory_bandwidth < 1.1
    assert 0.3 < c.matmul_flops["fp16"] / spec.peak("float16") < 1.1


def test_gpu_result_carries_sol_and_bound():
    task = wb.get_task("vector_add")
    res = wb.evaluate(task, task.solution_candidate(), device="cuda")
    assert res.status == "ok", res.message
    assert res.bound == "memory" and 0.3 < res.sol_fraction <= 1.0 / 0.9
    print(f"\nvector_add: {res.timing.median_ms:.4f} ms, SOL {100 * res.sol_fraction:.1f}%")
