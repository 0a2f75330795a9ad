# CHEAT (docs/anti-cheating.md, cheat 6): ModelNew inherits the reference's forward, so "the kernel" is the reference.
# Caught statically: reference-subclass.
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


@triton.jit
def unused_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(Model):
    pass
