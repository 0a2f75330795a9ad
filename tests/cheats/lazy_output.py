# CHEAT (docs/anti-cheating.md, cheat 8): returns a tensor subclass whose storage is empty; the kernel would only run when
# the result is used (__torch_function__), so a timer around forward sees no work. Outputs must be exactly
# torch.Tensor: lazy-output.
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


class LazySoftmax(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, LazySoftmax) and getattr(a, "_pending", None) is not None:
                src, a._pending = a._pending, None
                plain = a.as_subclass(torch.Tensor)
                softmax_kernel[(src.shape[0],)](src, plain, src.shape[1], src.stride(0),
                                                BLOCK=triton.next_power_of_2(src.shape[1]))
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x).as_subclass(LazySoftmax)
        y._pending = x
        return y
