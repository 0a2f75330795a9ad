# CHEAT (docs/anti-cheating.md, cheat 1): allocates the output with empty_like and launches a kernel that writes nothing
# (its one program gets a row length of 0), hoping the allocator hands back memory that still holds the reference's result.
# The protocol poisons freed memory with NaN and re-runs on fresh memory: stale-memory. On a GPU the first call
# may be handed the block of the reference output the protocol computed (and freed) just before it, so that
# call passes; the second, poisoned call then shows NaN and the flag can be unwritten-output instead.
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
        softmax_kernel[(1,)](x, y, 0, x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
