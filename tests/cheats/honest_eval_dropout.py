# HONEST: a softmax kernel followed by `F.dropout(y, p, training=self.training)`, as in a published Triton kernel
# for KernelBench L2/83. The judge builds every model in eval mode (as KernelBench does), where dropout is the
# identity: no operator runs. The static scan flags F.dropout; the dispatcher's record (CPU) and the profile (GPU)
# show nothing of torch's ran, so the finding is cleared: ok.
import torch
import torch.nn as nn
import torch.nn.functional as F
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
    def __init__(self, dropout_p: float = 0.2):
        super().__init__()
        self.dropout_p = dropout_p

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return F.dropout(y, self.dropout_p, training=self.training)
