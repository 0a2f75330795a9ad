# Returns uninitialized memory shaped like the output: may read a stale result, must be rejected.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        noop_kernel[(1,)](x)
        return torch.empty_like(x)
