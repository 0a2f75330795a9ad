"""Roofline on a real GPU: measured ceilings are a sane share of the datasheet, the worker's count on real tensors
equals the fake count, and a GPU result carries SOL, bound and score. Run with -s to see the figures."""

from __future__ import annotations

import time

import pytest

import roofline
import workbench as wb
from roofline.counting import count_reference, count_work

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    import os

    path = tmp_path_factory.mktemp("kwb_cache")
    old = os.environ.get("KWB_CACHE_DIR")
    os.environ["KWB_CACHE_DIR"] = str(path)
    started = time.perf_counter()
    c = roofline.ceilings.get_ceilings("cuda")
    seconds = time.perf_counter() - started
    yield c, seconds
    if old is None:
        os.environ.pop("KWB_CACHE_DIR", None)
    else:
        os.environ["KWB_CACHE_DIR"] = old


def test_measured_ceilings_are_a_sane_share_of_the_datasheet(measured):
    c, seconds = measured
    spec = roofline.specs.detect("cuda")
    print(f"\n{c.device_name} ({seconds:.1f} s to measure): copy {c.copy_bandwidth / 1e12:.3f} TB/s "
          f"(datasheet {spec.memory_bandwidth / 1e12:.2f}); "
          + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s ({v / spec.peak(k):.0%})" for k, v in c.matmul_flops.items()))
    assert seconds < 60
    assert set(c.matmul_flops) == {"fp32", "tf32", "fp16", "bf16"}
    if spec.measured:
        pytest.skip(f"{c.device_name} is not in the datasheet table: nothing to compare with")
    assert 0.5 < c.copy_bandwidth / spec.memory_bandwidth < 1.1
    assert 0.3 < c.matmul_flops["fp16"] / spec.peak("float16") < 1.1
    assert 0.3 < c.matmul_flops["bf16"] / spec.peak("bfloat16") < 1.1
    assert 0.3 < c.matmul_flops["fp32"] / spec.peak("float32") < 1.1
    assert c.matmul_flops["tf32"] > 2 * c.matmul_flops["fp32"]  # TF32 really ran on the tensor cores
    assert roofline.ceilings.get_ceilings("cuda") == c  # cached


def test_worker_count_on_the_gpu_equals_the_fake_count():
    import torch

    task = wb.get_task("matmul")
    size = task.size("gpu")
    ref = task.load()
    model = ref.module.Model(*ref.init_inputs(size, 0)).cuda()
    real = count_work(model, ref.make_inputs(size, 1, "cuda"))
    fake = count_reference(task, size)
    torch.cuda.synchronize()
    assert real == {"flops": fake.flops, "bytes": fake.bytes} == {"flops": task.flops(size), "bytes": task.bytes(size)}


def test_gpu_result_carries_sol_bound_and_score():
    task = wb.get_task("vector_add")
    res = wb.evaluate(task, task.solution_candidate(), device="cuda")
    assert res.status == "ok", res.message
    spec = roofline.specs.detect("cuda")
    md = res.metadata
    print(f"\nvector_add on {res.device_name}: {res.timing.median_ms:.4f} ms, SOL {100 * res.sol_fraction:.1f}% "
          f"({res.bound}), score {md.get('sol_score')}, roof {md['roof']} ({md['roof_source']})")
    assert res.bound == "memory" and 0.3 < res.sol_fraction <= 1.0 / 0.9
    assert md["roof"] == spec.name and res.achieved_bytes_per_s == pytest.approx(res.bytes / (res.timing.median_ms / 1e3))
    assert 0.0 < md["sol_score"] <= 1.0 and md["floor_ms"] < res.timing.median_ms
