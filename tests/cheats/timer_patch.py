# CHEAT (docs/anti-cheating.md, cheat 9): an honest kernel, but importing the module replaces the timers a harness might
# use: CUDA events report a tenth of the real time and time.perf_counter runs ten times slower. The worker
# recorded the identities of its timing and checking functions before the import: timer-patch.
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_real_perf_counter = time.perf_counter
_real_elapsed = torch.cuda.Event.elapsed_time
time.perf_counter = lambda: _real_perf_counter() / 10
torch.cuda.Event.elapsed_time = lambda self, end: _real_elapsed(self, end) / 10

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
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
