"""Tutorial 08's final kernel (notebooks/kernels/flash_attention.py) and its benchmark against FlashAttention.

On the CPU the kernel runs on Triton's interpreter with its CPU blocks; on a GPU (marked `gpu`) through the
autotuner, in fp16 against PyTorch's FlashAttention backend, as benchmarks/flash_attention.py times it.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch.nn.functional import scaled_dot_product_attention

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import flash_attention as bench  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))
kernel = bench.load_kernel()


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("shape", [(2, 50, 16), (1, 2, 33, 32), (1, 5, 16), (1, 48, 16)],
                         ids=["ragged", "4d-ragged", "shorter-than-a-block", "whole-blocks"])
def test_kernel_matches_scaled_dot_product_attention(shape, causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape) for _ in range(3))
    out = kernel.flash_attention(q, k, v, causal=causal)
    expected = scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.shape == expected.shape
    assert (out - expected).abs().max().item() < 1e-5


def test_kernel_is_causal_by_its_loop_not_only_its_mask():
    """Keys and values past the first CPU block are NaN: the first block of queries must never read them."""
    block_m = kernel.CPU_BLOCKS[0]
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 3 * block_m, 16) for _ in range(3))
    k[:, block_m:], v[:, block_m:] = float("nan"), float("nan")
    with warnings.catch_warnings():  # the interpreter warns about the NaN it reduces in the later blocks
        warnings.simplefilter("ignore", RuntimeWarning)
        out = kernel.flash_attention(q, k, v, causal=True)
    assert torch.isfinite(out[:, :block_m]).all()
    assert torch.isnan(out[:, block_m:]).all()


@pytest.mark.parametrize("head_dim", [8, 24, 512])
def test_kernel_rejects_a_head_dim_tl_dot_cannot_tile(head_dim):
    q = torch.randn(1, 16, head_dim)
    with pytest.raises(ValueError, match=f"power of two from 16 to 256.*got {head_dim}"):
        kernel.flash_attention(q, q, q)


def test_kernel_rejects_mismatched_inputs():
    q = torch.randn(1, 16, 16)
    with pytest.raises(ValueError, match="share shape and dtype"):
        kernel.flash_attention(q, q[:, :8], q)


def test_attention_flops_count_both_matmuls_over_the_pairs_computed():
    # B=8, H=16, N=2048, D=64: 4*B*H*D*N^2 full; causal counts the N(N+1)/2 pairs on and below the diagonal.
    assert bench.attention_flops(8, 16, 2048, 64, causal=False) == 4 * 8 * 16 * 64 * 2048 * 2048 == 137_438_953_472
    assert bench.attention_flops(8, 16, 2048, 64, causal=True) == 4 * 8 * 16 * 64 * 2048 * 2049 // 2
    assert bench.attention_flops(1, 1, 1, 16, causal=True) == 64


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message is for machines without a GPU")
def test_benchmark_without_a_gpu_says_so_and_exits_cleanly():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/flash_attention.py")], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("flash_attention benchmark: no CUDA GPU here, nothing to measure "
                                   "(run it on a GPU machine)")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_kernel_matches_flash_attention_in_fp16_on_a_gpu(causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1000, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        expected = scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = kernel.flash_attention(q, k, v, causal=causal)
    assert (out.float() - expected.float()).abs().max().item() < 1e-2
