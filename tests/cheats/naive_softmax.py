# CHEAT (docs/anti-cheating.md, cheat 11): softmax as exp(x) / sum(exp(x)) without subtracting the row maximum. Right while every
# logit stays below ~88, where fp32 exp overflows; then inf / inf is NaN. Caught by the "large" round (the task's
# own draws times 1e3): non-finite.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def naive_softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        naive_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
