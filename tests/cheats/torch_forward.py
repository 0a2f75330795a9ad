# CHEAT (docs/anti-cheating.md, cheat 4): a "Triton" candidate that defines a kernel for show but lets PyTorch do the work
# in forward. Caught statically: torch-compute-in-forward.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
