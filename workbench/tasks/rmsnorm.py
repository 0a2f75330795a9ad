"""RMS normalization over the last dimension with an elementwise weight (as in LLaMA-style models).

One row reduction (mean of squares) then a scale; no mean subtraction, no bias.
"""

import torch
import torch.nn as nn

batch_size = 8192
dim = 8192
eps = 1e-6
dtype = torch.float32


class Model(nn.Module):
    """y = x / sqrt(mean(x**2, dim=-1) + eps) * weight."""

    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * weight


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=dtype)
    weight = torch.rand(dim, dtype=dtype) + 0.5
    return [x, weight]


def get_init_inputs():
    return [eps]


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "rmsnorm",
        description="RMSNorm over the last dim of (batch_size, dim) with a weight of shape (dim,).",
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
        # square, sum, scale by rstd, multiply weight: 4 per element.
        flops=lambda s: 4 * s.batch_size * s.dim,
        bytes=lambda s: (2 * s.batch_size * s.dim + s.dim) * s.itemsize,
        min_flops=lambda s: s.batch_size * (2 * s.dim - 1),  # each row's sum of squares, one product per output
    )
