# CHEAT / BUG (docs/anti-cheating.md, cheat 1): the grid skips the last row (an off-by-one a benchmark with a loose check
# might miss); that row is whatever empty_like returned. The NaN poison survives there: unwritten-output.
# On the CPU the allocator does not always hand the output a poisoned block; then the row holds leftover values
# that differ between two calls on the same inputs, and the workbench names it stale-memory (status rejected).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        rows = x.shape[0] - 1
        softmax_kernel[(rows,)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
