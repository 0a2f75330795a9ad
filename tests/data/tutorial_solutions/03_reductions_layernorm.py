# Worked solution of tutorial 03's exercise: the row-sum kernel fed fp16 input, so it sums in fp16 precision.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, 0).to(y_ptr.dtype.element_ty))

class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).half().contiguous()
        y = torch.empty(x2.shape[0], device=x.device, dtype=torch.float16)
        row_sum_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=128)
        return y.float().reshape(x.shape[:-1])
