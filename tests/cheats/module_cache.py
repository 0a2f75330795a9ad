# CHEAT (docs/anti-cheating.md, cheat 10): a module-level dict of results keyed by the input's address; a benchmark that
# reuses its input tensor gets every call after the first for free. Caught statically: module-cache.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_RESULTS = {}


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
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _RESULTS:
            y = torch.empty_like(x)
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
            _RESULTS[key] = y
        return _RESULTS[key]
