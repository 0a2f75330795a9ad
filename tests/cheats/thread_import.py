# CHEAT (docs/anti-cheating.md, cheat 8): launches the kernel from a worker thread and returns before it finishes, so a
# timer around forward measures nothing. Caught statically: thread-use (the threading import).
import threading

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
    def forward(self, x):
        y = torch.empty_like(x)
        args = (x, y, x.shape[1], x.stride(0))
        threading.Thread(target=lambda: softmax_kernel[(x.shape[0],)](*args, BLOCK=triton.next_power_of_2(x.shape[1]))).start()
        return y
