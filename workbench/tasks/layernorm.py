"""Layer normalization over the last dimension with an elementwise weight and bias.

Two row reductions (mean, variance) then an elementwise affine pass. Weight and bias are forward inputs,
not parameters, so they are drawn fresh (and from every distribution) like x; a kernel that ignores them fails.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 8192
eps = 1e-5
dtype = torch.float32


class Model(nn.Module):
    """y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, statistics over the last dim (biased var)."""

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.eps)


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=dtype)
    weight = torch.rand(dim, dtype=dtype) + 0.5
    bias = torch.randn(dim, dtype=dtype)
    return [x, weight, bias]


def get_init_inputs():
    return [eps]


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "layernorm",
        description="LayerNorm over the last dim of (batch_size, dim) with weight and bias of shape (dim,).",
        sizes={"cpu": {"batch_size": 64, "dim": 256}, "gpu": {"batch_size": 8192, "dim": 8192}},
        sweep={
            "cpu": [{"batch_size": 37, "dim": 100}, {"batch_size": 16, "dim": 1000}],
            "gpu": [
                {"batch_size": 4096, "dim": 1024},
                {"batch_size": 4096, "dim": 4096},
                {"batch_size": 8192, "dim": 5000},
                {"batch_size": 8192, "dim": 8192},
                {"batch_size": 2048, "dim": 32768},
            ],
        },
        dtypes=("float32", "float16", "bfloat16"),
        # sum, subtract mean, square, sum, scale by rstd, multiply weight, add bias: 7 per element.
        flops=lambda s: 7 * s.batch_size * s.dim,
        bytes=lambda s: (2 * s.batch_size * s.dim + 2 * s.dim) * s.itemsize,
        min_flops=lambda s: s.batch_size * (2 * s.dim - 1),  # each row's sum, one operation per output
    )
