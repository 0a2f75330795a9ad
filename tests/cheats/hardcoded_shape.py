# CHEAT (docs/anti-cheating.md, cheat 11): tuned to the benchmark shape (dim = 64): the row max and sum only look at the
# first 64 columns. Right on the benchmark, wrong on the other sizes the protocol checks: mismatch.
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
    head = tl.where(cols < 64, x, -float("inf"))  # the benchmark's row length, hard-coded
    m = tl.max(head, 0)
    s = tl.sum(tl.where(cols < 64, tl.exp(head - m), 0.0), 0)
    tl.store(y_ptr + row * stride + cols, tl.exp(x - m) / s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
