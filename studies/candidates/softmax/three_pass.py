# Softmax as three kernels (row max, row sum of exponentials, normalize): the unfused baseline.
# Each pass re-reads the row from memory, so it moves about 3x the bytes of a fused kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        acc = tl.maximum(acc, x)
    tl.store(out_ptr + row, tl.max(acc, 0))


@triton.jit
def row_expsum_kernel(x_ptr, max_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_max = tl.load(max_ptr + row)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        acc += tl.exp(x - row_max)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def normalize_kernel(x_ptr, max_ptr, sum_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_max = tl.load(max_ptr + row)
    denom = tl.load(sum_ptr + row)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / denom
        tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        rows, cols = x2.shape
        row_max = torch.empty(rows, device=x.device, dtype=torch.float32)
        row_sum = torch.empty(rows, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x2)
        row_max_kernel[(rows,)](x2, row_max, cols, x2.stride(0), BLOCK=BLOCK)
        row_expsum_kernel[(rows,)](x2, row_max, row_sum, cols, x2.stride(0), BLOCK=BLOCK)
        normalize_kernel[(rows,)](x2, row_max, row_sum, y, cols, x2.stride(0), BLOCK=BLOCK)
        return y.reshape(x.shape)
