# CHEAT (docs/anti-cheating.md, cheats 4/5): the first call is honest (a Triton softmax in place on a copy of the input, so the
# launch tracker sees a launch rewrite an output that held data). Every later call takes torch.softmax by name
# (no torch call in the source) and passes its result through a Triton kernel that stores nothing, which the
# launch tracker then forgives as an honest kernel leaving its output alone. On the CPU the dispatcher's record
# shows torch computing in forward: torch-compute-in-forward. On a GPU the profile shows torch's kernels take
# the time: low-coverage.
import importlib

import torch.nn as nn
import triton
import triton.language as tl

_op = getattr(importlib.import_module("to" + "rch"), "soft" + "max")


@triton.jit
def softmax_inplace_kernel(y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(y_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, v, mask=(offs < n) & (v != v))  # never stores: v is never NaN


class ModelNew(nn.Module):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls == 1:
            y = x.contiguous().clone()
            softmax_inplace_kernel[(y.shape[0],)](y, y.shape[1], y.stride(0), BLOCK=triton.next_power_of_2(y.shape[1]))
            return y
        y = _op(x, -1)
        touch_kernel[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024)
        return y
