"""Reference Triton solution for `row_sum`: one program per row, a per-lane fp32 accumulator over
BLOCK-wide chunks, then one tree reduction (more accurate than a running scalar sum)."""

from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        out = torch.empty(rows, dtype=x.dtype, device=x.device)
        block = min(triton.next_power_of_2(cols), 4096 if x.is_cuda else 256)
        warps = 4 if block <= 1024 else 8
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=block, num_warps=warps)
        return out
