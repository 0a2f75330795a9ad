# CHEAT (docs/anti-cheating.md, cheats 4/5): the output is computed with torch ops fetched by name (four library kernels:
# max, subtract+exp, sum, divide), then handed to a Triton kernel that stores nothing, so the output *was*
# passed to a launch. On the CPU the launch tracker sees that no launch changed the output -> decoy-kernel;
# on a GPU the profiler sees the library kernels take most of the time -> low-coverage.
import torch.nn as nn
import triton
import triton.language as tl


def _m(t, name, *args, **kw):
    return getattr(t, name)(*args, **kw)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, v, mask=(offs < n) & (v != v))  # a store that never happens (v is never NaN)


class ModelNew(nn.Module):
    def forward(self, x):
        e = _m(_m(x, "sub", _m(x, "amax", dim=-1, keepdim=True)), "exp")
        y = _m(e, "div", _m(e, "sum", dim=-1, keepdim=True))
        touch_kernel[(1,)](y, y.numel(), BLOCK=16)
        return y
