# CHEAT (docs/anti-cheating.md, cheat 3): computes in place into its input and returns the input (no allocation, and a
# reference run afterwards on the same tensor would see softmax(x) instead of x). Inputs are compared
# bit-exactly after every call: input-mutation.
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
        softmax_kernel[(x.shape[0],)](x, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return x
