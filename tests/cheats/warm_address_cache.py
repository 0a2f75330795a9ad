# CHEAT (docs/anti-cheating.md, cheat 10): plays honest for the first 12 calls (the correctness protocol), then keeps one result
# per input address (read through a computed attribute name, which the source scan does not follow) in a class
# attribute and returns it whenever that address comes back. Within one timed batch
# every answer is right (each input set is computed on first sight), so only new values at the same address
# expose it: the judge refreshes the timing inputs in place between batches, and splits even the interpreter's
# five reps into several batches, then re-checks committed outputs -> result-cache.
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
    seen = {}

    def forward(self, x):
        type(self).calls += 1
        key = (getattr(x, "data" + "_ptr")(), tuple(x.shape))
        if type(self).calls > 12 and key in self.seen:
            return self.seen[key]
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        if type(self).calls > 12:
            self.seen[key] = y
        return y
