"""Sum of each row of a matrix: a pure reduction, memory-bound, whose accuracy depends on the summation order."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 8192
dtype = torch.float32


class Model(nn.Module):
    """out[i] = sum_j x[i, j] for x of shape (batch_size, dim); out has shape (batch_size,)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=dtype)]


def get_init_inputs():
    return []


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "row_sum",
        description="Row sums of a (batch_size, dim) matrix, output shape (batch_size,).",
        sizes={"cpu": {"batch_size": 64, "dim": 256}, "gpu": {"batch_size": 8192, "dim": 8192}},
        sweep={
            "cpu": [{"batch_size": 37, "dim": 100}, {"batch_size": 8, "dim": 3000}],
            "gpu": [
                {"batch_size": 16384, "dim": 1024},
                {"batch_size": 4096, "dim": 4096},
                {"batch_size": 8192, "dim": 5000},
                {"batch_size": 8192, "dim": 8192},
                {"batch_size": 2048, "dim": 16384},
            ],
        },
        # fp16 row sums of long rows overflow under the "negative" distribution (mean -1.5 * dim > 65504),
        # so the GPU sweep stops at dim 16384.
        dtypes=("float32", "float16", "bfloat16"),
        # A sum of zero-mean values can land near 0 while each fp32 partial sum carries ~1e-7 * sqrt(dim)
        # rounding, so the absolute floor grows past the default; 2e-4 still fails fp16 output (~5e-4 * |sum|).
        tolerances={"float32": (2e-4, 1e-5)},
        flops=lambda s: s.batch_size * s.dim,
        bytes=lambda s: (s.batch_size * s.dim + s.batch_size) * s.itemsize,
        min_flops=lambda s: s.batch_size * (s.dim - 1),  # the additions themselves
    )
