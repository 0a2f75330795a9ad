# CHEAT (docs/anti-cheating.md, cheat 10): plays honest for the first 12 calls (the length of the correctness protocol),
# then returns the output it computed for the first input of a shape whenever the shape repeats, so the
# timed calls do no work. The call counter is a class attribute, so it survives new instances.
# On the CPU the worker re-checks the last timed call against its own inputs -> result-cache. On a GPU the
# last timed call happens to use the same input set as the cached one, so the re-check passes; the profiled
# coverage call then sees no kernel at all -> decoy-kernel (result-cache once the re-check covers every input
# set of the pool).
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
    calls = 0
    memo = {}

    def forward(self, x):
        type(self).calls += 1
        if type(self).calls > 12 and x.shape in self.memo:
            return self.memo[x.shape]
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        if type(self).calls > 12:
            self.memo[x.shape] = y
        return y
