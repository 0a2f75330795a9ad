# Worked solution of tutorial 02's exercise: the online softmax (running max and rescaled running sum),
# with a block smaller than the row.
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 64
NUM_WARPS = 4


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    # A finite floor instead of -inf keeps exp(m - m_new) defined in lanes that only ever see padding.
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    denom = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / denom
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        online_softmax_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y.reshape(x.shape)
