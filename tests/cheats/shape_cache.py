# CHEAT (docs/anti-cheating.md, cheat 10): the naive result cache an LLM writes: remember the last output per input shape
# (on the instance, so no module-level container) and return it whenever the shape repeats. The correctness
# protocol draws fresh inputs each round and revisits every size, so the stale answer is simply wrong: mismatch.
# The cached calls launch no kernel either, so decoy-kernel is raised too (status rejected).
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
    def __init__(self):
        super().__init__()
        self.last = {}

    def forward(self, x):
        if x.shape not in self.last:
            y = torch.empty_like(x)
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
            self.last[x.shape] = y
        return self.last[x.shape]
