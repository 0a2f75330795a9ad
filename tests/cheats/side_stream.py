# CHEAT (docs/anti-cheating.md, cheat 7), GPU only: launches the (correct) kernel on a side stream and returns at once, so a
# timer that records its end event on the current stream sees almost nothing. The workbench times every run
# to a device-wide synchronize, so the true cost is reported, with warnings stream-use (static) and
# side-stream (runtime). Not a rejection: the kernel is honest, only its timing trick is neutralized.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_side = None

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
        global _side
        if _side is None:
            _side = torch.cuda.Stream()
        y = torch.empty_like(x)
        _side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(_side):
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
