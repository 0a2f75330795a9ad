# CHEAT (docs/anti-cheating.md, cheat 4): wraps a copy of the reference Model and returns its output; the Triton kernel is
# decoration. Caught statically: reference-subclass ("calls the reference Model").
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Model()

    def forward(self, x):
        return self.inner(x)
