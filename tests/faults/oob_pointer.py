# A Triton kernel whose loads and stores run far past the end of the tensors (no mask, offset 1e9 elements).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def oob_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) + 1_000_000_000
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        oob_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y
