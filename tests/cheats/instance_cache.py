# CHEAT (docs/anti-cheating.md, cheat 10): a result cache on the instance keyed by the input's address: a benchmark that
# times the same input tensors again and again gets every repeat for free, and the answers are even right for
# those inputs. No module-level container is involved; the AST check follows attributes of self too: module-cache.
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
    def __init__(self):
        super().__init__()
        self.results = {}

    def forward(self, x):
        key = (x.data_ptr(), x._version)
        if key not in self.results:
            y = torch.empty_like(x)
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
            self.results[key] = y
        return self.results[key]
