# CHEAT (docs/anti-cheating.md, cheat 8): as thread_import, but the threading module is fetched by a computed name so the
# AST check sees no import; the thread waits a little, then writes the output after forward has returned.
# Caught at runtime: the thread count after forward is above the count before -> thread-deferral.
import importlib

import torch
import torch.nn as nn
import triton
import triton.language as tl

_threads = importlib.import_module("thread" + "ing")

@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


def _later(x, y):
    _threads.Event().wait(0.2)
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _threads.Thread(target=_later, args=(x, y), daemon=True).start()
        return y
