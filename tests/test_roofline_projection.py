"""Projections: a task's counted work placed on a datasheet GPU's roofline, with the bound and floor it implies."""

from __future__ import annotations

import pytest

import workbench as wb
from roofline.counting import count
from roofline.projection import DEFAULT_GPU, fmt_seconds, project, resolve_gpu
from roofline.specs import get_spec


def _row(task: str, size: dict, name: str = "k", status: str = "ok") -> dict:
    t = wb.get_task(task)
    work = count(t, size)
    return {"task": task, "candidate_name": name, "status": status, "size": size,
            "dtype": size.get("dtype", t.dtypes[0]), "flops": work.flops, "bytes": work.bytes}


def test_matmul_at_gpu_size_is_compute_bound_and_softmax_memory_bound_on_an_h100():
    h100 = get_spec("H100 SXM")
    mm, sm = wb.get_task("matmul").size("gpu"), wb.get_task("softmax").size("gpu")
    (softmax, matmul), left = project([_row("matmul", mm), _row("softmax", sm, "a"), _row("softmax", sm, "b")])
    assert not left and softmax.task == "softmax" and matmul.task == "matmul"  # sorted by intensity
    n = 4096
    assert matmul.intensity == pytest.approx(2 * n**3 / (3 * n * n * 2))  # 1365 FLOP/B, past the fp16 ridge (295)
    assert matmul.bound == "compute" and matmul.attainable_flops_per_s == h100.peak("float16")
    assert matmul.floor_s == pytest.approx(2 * n**3 / h100.peak("float16"))
    rows, cols = sm["batch_size"], sm["dim"]
    assert softmax.bound == "memory" and softmax.candidates == ("a", "b")  # one point per task and size
    assert softmax.floor_s == pytest.approx(2 * rows * cols * 4 / h100.memory_bandwidth)
    assert softmax.attainable_flops_per_s == pytest.approx(softmax.intensity * h100.memory_bandwidth)
    assert softmax.verdict() == "memory-bound, floor 160 µs on H100 SXM"
    assert matmul.label() == "matmul (M=4096, N=4096, K=4096, float16)"


def test_the_same_work_on_a_smaller_gpu_and_rows_without_counts():
    sm = wb.get_task("softmax").size("cpu")
    a100, _ = project([_row("softmax", sm)], "A100")
    h100, _ = project([_row("softmax", sm)])
    assert a100[0].floor_s > h100[0].floor_s and a100[0].gpu == "A100 SXM 80GB" and h100[0].gpu == DEFAULT_GPU
    _, left = project([{"task": "x", "candidate_name": "bare", "flops": None, "bytes": 64.0},
                       {"task": "x", "candidate_name": "none"}])
    assert [r["reason"] for r in left] == ["no FLOP count", "no counted work (FLOPs and bytes)"]
    with pytest.raises(ValueError, match="needs a GPU's datasheet"):
        resolve_gpu(get_spec("cpu"))
    assert [fmt_seconds(x) for x in (2.5, 4.2e-3, 1.9e-6, 1.91e-9)] == ["2.5 s", "4.2 ms", "1.9 µs", "1.91 ns"]
