# CHEAT (docs/anti-cheating.md, cheat 2): a kernel that writes zeros. For a tolerance that is loose compared with the
# outputs (softmax values are ~1/dim) zeros could pass; the protocol fails a constant output where the
# reference varies: degenerate-output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zero_kernel[(triton.cdiv(y.numel(), 256),)](y, y.numel(), BLOCK=256)
        return y
