# CHEAT (docs/anti-cheating.md, cheat 12): silently computes in fp16 (half the bytes, faster exp) and stores fp32, so dtype
# checks pass. fp32 tolerances (1e-5 relative) are far tighter than fp16 rounding (~5e-4): mismatch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_fp16_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float16)
    e = tl.exp((x - tl.max(x, 0)).to(tl.float32)).to(tl.float16)
    s = tl.sum(e.to(tl.float32), 0).to(tl.float16)
    tl.store(y_ptr + row * stride + cols, (e / s).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_fp16_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
