"""The one-pass judgement of a large output on a real GPU (`judge/correctness/compare_fused.py`): the same verdicts as the
sliced torch judgement, on the compiled kernels, and how much faster it is on a real-size output."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_output_compare_fused import _judge, test_the_one_pass_judgement_is_the_sliced_one  # noqa: E402

from workbench.tasks.task import Tolerance  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("faults", [False, True])
def test_the_compiled_one_pass_judgement_is_the_sliced_one(dtype, faults):
    test_the_one_pass_judgement_is_the_sliced_one(dtype, faults, device="cuda")


def test_a_real_size_output_is_judged_in_one_pass_and_faster():
    n = 128 * 128 * 126 * 126  # KernelBench L2/1's output, 260M elements
    ref64 = torch.randn(n, dtype=torch.float64, device="cuda")
    native = ref64.float()
    out = native.clone()
    out[12345] += 1.0
    tol = Tolerance(atol=1e-4, rtol=1e-4)
    seconds = {}
    verdicts = {}
    for mode in ("never", "auto", "never", "auto"):  # the second of each pair is warm
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        verdicts[mode] = _judge(mode, out, native, ref64, tol)
        torch.cuda.synchronize()
        seconds[mode] = time.perf_counter() - t0
    print(f"\n260M-element output: sliced torch {seconds['never']:.3f} s, one pass {seconds['auto']:.3f} s "
          f"({seconds['never'] / seconds['auto']:.1f}x)")
    assert verdicts["auto"].flags == verdicts["never"].flags
    assert "at index (12345,)" in verdicts["auto"].flags[0][1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_compiled_bound_of_two_calls_is_the_sliced_one(dtype):
    from test_output_compare_fused import test_the_one_pass_bound_of_two_calls_is_the_sliced_one as check

    check(dtype, device="cuda")


@pytest.mark.parametrize("with_reference", [True, False])
def test_a_first_output_kept_on_the_host_is_judged_on_the_gpu_slice_by_slice(monkeypatch, with_reference):
    """A large output's first call is kept in page-locked host memory when the GPU has no room for a copy
    (`correctness._Protocol._keep_first`); the two calls' bound is then judged a slice at a time on the GPU, with the same result as
    when both are on the GPU."""
    from test_output_compare_fused import _case

    from workbench.eval.judge.correctness import check as correctness
    from workbench.eval.judge.correctness import compare_fused as fused

    monkeypatch.setattr(correctness, "CHUNK", 3 * fused.BLOCK + 5)  # several slices, the last one ragged
    a, native, ref64 = _case(torch.float32, True, seed=7, device="cuda")
    b = a.clone()
    b[11] += 0.25  # a reordered sum, larger than the bound
    b[2 * fused.BLOCK + 1] = float("nan")
    a[2 * fused.BLOCK + 1] = float("nan")  # NaN in both: the same
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    reference = ref64 if with_reference else None
    on_gpu = correctness._pair_ratio(a, b, native, reference, tol)
    on_host = correctness._pair_ratio(a.cpu().pin_memory(), b, native, reference, tol)
    assert on_host == pytest.approx(on_gpu, rel=1e-12) and on_gpu > 1
    b[fused.BLOCK + 9] = 1.0  # NaN in the first call only
    assert correctness._pair_ratio(a.cpu().pin_memory(), b, native, reference, tol) == float("inf")
