import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_middle_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # x viewed as (B, R, C); one program sums BLOCK_C columns of one batch over all R rows.
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_C], tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + b * R * C + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile.to(tl.float32), 0)
    tl.store(y_ptr + b * C + cols, acc.to(y_ptr.dtype.element_ty), mask=cols < C)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        shape = list(x.shape)
        b = 1
        for s in shape[: self.dim]:
            b *= s
        r = shape[self.dim]
        c = x.numel() // (b * r)
        out_shape = shape[: self.dim] + [1] + shape[self.dim + 1:]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        grid = (b, triton.cdiv(c, 64))
        sum_middle_kernel[grid](x, y, r, c, BLOCK_R=32, BLOCK_C=64)
        return y
