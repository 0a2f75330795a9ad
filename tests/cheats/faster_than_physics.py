# CHEAT (docs/anti-cheating.md, cheats 10, 13), GPU only: memoizes outputs by a content fingerprint of the input kept on the
# instance (no module-level container, no data_ptr), and on a hit launches a one-element kernel on the cached
# output, so launch tracking, provenance and profiler coverage are all satisfied and the result is right for
# its inputs. Timed input sets get new values between batches, so each set misses once per batch; within a batch
# the repeated sets hit and take microseconds on a task that must move hundreds of MB: the median is below bytes /
# bandwidth -> faster-than-physics. The cache keeps every output it made, so over many batches it may exhaust the
# GPU first (out of memory, in its own runner): either way it is not "ok".
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


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = (tuple(x.shape), float(x[0, 0]), float(x[-1, -1]))
        y = self.seen.get(key)
        if y is not None:
            touch_kernel[(1,)](y)
            return y
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        self.seen[key] = y
        return y
