# CHEAT (docs/anti-cheating.md, cheat 2): writes 1/dim everywhere, the mean of every softmax row, which is within a loose
# tolerance of many outputs. A constant output where the reference varies: degenerate-output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_kernel(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + value, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        fill_kernel[(triton.cdiv(y.numel(), 256),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=256)
        return y
