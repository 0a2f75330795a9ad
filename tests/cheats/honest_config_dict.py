# HONEST: row softmax in Triton with a module-level dict of launch configs keyed by the row length.
# A cache of *configs* (block size, warps) is allowed: it changes how the kernel runs, never what it returns.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CONFIGS: dict[int, dict[str, int]] = {}


def _config(n_cols: int) -> dict[str, int]:
    if n_cols not in _CONFIGS:
        block = triton.next_power_of_2(n_cols)
        _CONFIGS[n_cols] = {"BLOCK": block, "num_warps": 4 if block <= 2048 else 8}
    return _CONFIGS[n_cols]


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
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        cfg = _CONFIGS.get(x2.shape[1]) or _config(x2.shape[1])
        softmax_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=cfg["BLOCK"],
                                       num_warps=cfg["num_warps"])
        return y.view_as(x)
