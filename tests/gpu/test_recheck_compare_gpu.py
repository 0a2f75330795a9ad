"""The re-check kernel on a GPU counts what the torch rule counts, for every float width, and needs no temporary the
size of the output."""

from __future__ import annotations

import pytest
import torch

from workbench.eval.judge.correctness import recheck as recheck_compare

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64])
def test_the_kernel_counts_what_torch_counts_on_the_gpu(dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    real = torch.float32 if dtype == torch.complex64 else dtype
    expected = torch.randn(3, 4096, 1023, device="cuda", generator=gen, dtype=torch.float32).to(real)
    if dtype == torch.complex64:
        expected = torch.complex(expected, expected.flip(-1))
    got = expected.clone()
    flat = torch.view_as_real(got).reshape(-1) if got.is_complex() else got.reshape(-1)
    flat[::1001] += 0.25
    flat[7] = float("nan")
    want = recheck_compare.count_off_torch(got, expected, 1e-5, 1e-5, 0.0)
    assert want >= flat.numel() // 1001
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    assert recheck_compare.count_off(got, expected, 1e-5, 1e-5, 0.0) == want
    assert torch.cuda.max_memory_allocated() - before < 1 << 20  # the counter, not a copy of the output
    assert recheck_compare.count_off(expected.clone(), expected, 1e-5, 1e-5, 0.0) == 0
