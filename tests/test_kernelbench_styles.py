"""Kernels in the styles KernelBench solutions use, judged as docs/verdicts.md says they should be: a Triton
epilogue fused after PyTorch's convolution (fine under the "partial" kernel policy, rejected under "strict"), an
algorithmic win (a diagonal matmul as a row scaling: ok, and not faster than physics), an fp32 split-K reduction
(ok), and TF32-rounded operands in an fp32 matmul (caught unless the task allows TF32). On the CPU the Triton
interpreter runs them; the GPU-only coverage check is in tests/gpu/test_kernelbench_gpu.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.eval.checks.static_scan import scan
from workbench.eval.judge.correctness import check as correctness
from workbench.eval.runner.loading import load_candidate
from workbench.result import Result, Timing
from workbench.tasks.precision import applied

KB = Path(__file__).parent / "kernelbench"

CONV_EPILOGUE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(y_ptr, bias_ptr, out_ptr, n, hw, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    channel = (offs // hw) % channels
    v = tl.load(y_ptr + offs, mask=mask, other=0.0) + tl.load(bias_ptr + channel, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    """cuDNN's convolution, then bias + ReLU fused in one pass over the output."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, padding=self.conv.padding).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        bias_relu_kernel[(triton.cdiv(n, 1024),)](y, self.bias, out, n, y.shape[2] * y.shape[3], y.shape[1],
                                                  BLOCK=1024)
        return out
'''

ROW_SCALE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(d_ptr, b_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < cols
    scale = tl.load(d_ptr + row)
    tl.store(out_ptr + row * cols + offs, scale * tl.load(b_ptr + row * cols + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    """diag(d) @ B as a row scaling: N * M multiplications instead of the dense product's 2 * N^2 * M."""

    def forward(self, d, b):
        d, b = d.contiguous(), b.contiguous()
        out = torch.empty_like(b)
        rows, cols = b.shape
        row_scale_kernel[(rows, triton.cdiv(cols, 128))](d, b, out, cols, BLOCK=128)
        return out
'''

SPLIT_K = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_kernel(a_ptr, b_ptr, part_ptr, M, N, K, k_per_split,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ROUND_TF32: tl.constexpr):
    """One K-slice of C = A @ B^T (B stored as N x K) into part[split]; fp32 FMA, no TF32 unless asked."""
    pm, pn, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k0 = split * k_per_split
    for k in range(k0, k0 + k_per_split, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        if ROUND_TF32:  # keep 10 mantissa bits, as TF32 tensor cores do
            a = ((a.to(tl.int32, bitcast=True) + 0x1000) & -8192).to(tl.float32, bitcast=True)
            b = ((b.to(tl.int32, bitcast=True) + 0x1000) & -8192).to(tl.float32, bitcast=True)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(part_ptr + split * M * N + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def reduce_kernel(part_ptr, out_ptr, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLITS):
        acc += tl.load(part_ptr + s * n + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)


class ModelNew(nn.Module):
    SPLITS = 4
    ROUND_TF32 = False

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[0]
        per = triton.cdiv(triton.cdiv(K, self.SPLITS), 32) * 32
        part = torch.empty((self.SPLITS, M, N), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16), self.SPLITS)
        partial_kernel[grid](a, b, part, M, N, K, per, BM=16, BN=16, BK=32, ROUND_TF32=self.ROUND_TF32)
        out = torch.empty((M, N), device=a.device, dtype=torch.float32)
        reduce_kernel[(triton.cdiv(M * N, 256),)](part, out, M * N, SPLITS=self.SPLITS, BLOCK=256)
        return out
'''

TF32_SPLIT_K = SPLIT_K.replace("    ROUND_TF32 = False", "    ROUND_TF32 = True")
#: Long K with small M and N: the interpreter stays fast while fp32 roundoff grows past atol = rtol = 1e-5.
LONG_K = {"M": 16, "K": 1024, "N": 16}


def _class(source: str, tmp_path: Path) -> type:
    return load_candidate({"source": source, "language": "triton"}, "cpu", str(tmp_path))[1]


def _protocol(task: wb.Task, cls: type, size: dict) -> correctness.CheckReport:
    return correctness.run_correctness(task.load(), cls, device="cpu", sizes=[size], seed=0, tolerance=task.tolerance,
                                       distributions=task.distributions)


# ---- a Triton epilogue after PyTorch's convolution (KernelBench L2's standard strategy) ---------------------

def test_conv_epilogue_is_accepted_under_partial_and_correct(tmp_path):
    task = wb.load_kernelbench(KB / "level2" / "1_Conv2d_BiasAdd_ReLU.py", fit="cpu")
    assert task.kernel_policy == "partial"
    assert scan(CONV_EPILOGUE, "triton", policy=task.kernel_policy) == []
    report = _protocol(task, _class(CONV_EPILOGUE, tmp_path), task.size("cpu"))
    assert report.passed, report.findings
    # Absolute errors grow with the inputs in the "large" round (x 1e3); the others stay small.
    assert all(r["max_abs"] < 1e-4 for r in report.rounds if r["dist"] != "large")


def test_conv_epilogue_is_rejected_under_strict():
    task = wb.load_kernelbench(KB / "level2" / "1_Conv2d_BiasAdd_ReLU.py", fit="cpu", kernel_policy="strict")
    found = scan(CONV_EPILOGUE, "triton", policy=task.kernel_policy)
    assert [f.flag for f in found] == ["torch-compute-in-forward"] and "F.conv2d" in found[0].detail
    result = wb.evaluate(task, wb.Candidate(source=CONV_EPILOGUE, language="triton"), device="cpu", time_it=False)
    assert result.status == "rejected" and result.flags == ["torch-compute-in-forward"]


# ---- an algorithmic win is not faster than physics ----------------------------------------------------------

def test_diagonal_matmul_as_row_scaling_is_correct():
    task = wb.load_kernelbench(KB / "level1" / "4_Diagonal_times_matrix.py", fit="cpu")
    assert scan(ROW_SCALE, "triton", policy=task.kernel_policy) == []
    result = wb.evaluate(task, wb.Candidate(source=ROW_SCALE, language="triton"), device="cpu", time_it=False)
    assert result.status == "ok", result.message


def _h100_result(ms: float) -> Result:
    return Result(task="diag", candidate_id="c", candidate_name="row-scale", language="triton", status="ok",
                  size={}, dtype="float32", device="cuda", device_name="NVIDIA H100 80GB HBM3",
                  timing=Timing(ms, ms, ms, 0.0, ms, ms, 100, "cuda-events"))


def test_row_scaling_below_the_dense_flop_floor_is_not_faster_than_physics():
    """At the file's size (N = M = 4096) the reference's dense matmul counts 2 N^3 = 137 GFLOP, 0.28 ms even at
    TF32's 495 TFLOP/s; the row scaling moves 2 N M + N floats (134 MB, 0.04 ms at 3.35 TB/s) and takes ~0.05 ms.
    Only the bytes (and a declared min_flops) are lower bounds."""
    from roofline.sol import annotate_result, faster_than_physics

    task = wb.load_kernelbench(KB / "level1" / "4_Diagonal_times_matrix.py")
    n = m = 4096
    counted = {"flops": 2.0 * n * n * m, "bytes": (n + 2.0 * n * m) * 4}
    assert faster_than_physics(_h100_result(0.05), task, counted) == ""
    fast = annotate_result(_h100_result(0.05), task, counted)
    assert fast.metadata["physics_floor_ms"] == pytest.approx(counted["bytes"] / 3.35e12 * 1e3, rel=1e-6)
    assert fast.metadata["physics_floor_ms"] < 0.05 < 2.0 * n * n * m / 494.7e12 * 1e3
    # below the bytes floor: a broken measurement (the judge rejects it: judge/verdict.physics)
    assert faster_than_physics(_h100_result(0.02), task, counted)
    # A task that declares a true FLOP lower bound has it enforced (here N * M multiplications: far below 0.05 ms).
    task.min_flops = lambda size: float(n * m)
    assert faster_than_physics(_h100_result(0.05), task, counted) == ""
    assert annotate_result(_h100_result(0.05), task, counted).metadata["min_flops"] == n * m
    task.min_flops = lambda size: 2.0 * n * n * m  # were the dense count a true bound, 0.05 ms would be impossible
    assert faster_than_physics(_h100_result(0.05), task, counted)


# ---- an fp32 split-K reduction, and TF32 operands ----------------------------------------------------------

def test_fp32_split_k_matmul_is_ok(tmp_path):
    task = wb.load_kernelbench(KB / "level1" / "1_Rectangular_matmul_transposed_B.py", sizes=LONG_K)
    result = wb.evaluate(task, wb.Candidate(source=SPLIT_K, language="triton"), device="cpu", time_it=False)
    assert result.status == "ok", result.message
    report = _protocol(task, _class(SPLIT_K, tmp_path), LONG_K)
    assert report.passed and report.error_budget["native_error"] > 0
    assert report.error_budget["worst_ratio"] <= 1


def test_tf32_operands_are_caught_unless_the_task_allows_tf32(tmp_path):
    ieee = wb.load_kernelbench(KB / "level1" / "1_Rectangular_matmul_transposed_B.py", sizes=LONG_K)
    result = wb.evaluate(ieee, wb.Candidate(source=TF32_SPLIT_K, language="triton"), device="cpu", time_it=False)
    assert result.status == "incorrect" and result.flags == ["mismatch"], result.message
    # The message names TF32 as the cause, with both ways out.
    assert "the errors match TF32 rounding of the inputs" in result.message, result.message
    assert 'input_precision="ieee"' in result.message
    assert 'precision="tf32"' in result.message
    honest_wrong = wb.evaluate(ieee, wb.Candidate(source=SPLIT_K.replace("acc += tl.load(", "acc -= tl.load("),
                                                  language="triton"), device="cpu", time_it=False)
    assert honest_wrong.status == "incorrect" and "rounding of the inputs" not in honest_wrong.message
    allowed = wb.load_kernelbench(KB / "level1" / "1_Rectangular_matmul_transposed_B.py", sizes=LONG_K,
                                  precision="tf32")
    cls = _class(TF32_SPLIT_K, tmp_path)
    with applied(allowed.precision, "cpu"):  # as the engine applies a task's policy around both sides
        report = _protocol(allowed, cls, LONG_K)
    assert report.passed, report.findings
    assert report.error_budget["native_error"] > 1e-5  # the native reference carried TF32's error too
    assert not _protocol(ieee, cls, LONG_K).passed
