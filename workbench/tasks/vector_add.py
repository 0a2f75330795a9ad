"""Elementwise sum of two vectors: the simplest memory-bound kernel (2 reads, 1 write per element)."""

import torch
import torch.nn as nn

n = 1 << 26
dtype = torch.float32


class Model(nn.Module):
    """out = a + b for two vectors of length n."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    return [torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)]


def get_init_inputs():
    return []


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "vector_add",
        description="out = a + b over two 1-D tensors of n elements.",
        sizes={"cpu": {"n": 8192}, "gpu": {"n": 1 << 26}},
        sweep={
            "cpu": [{"n": 1000}, {"n": 12345}],
            "gpu": [{"n": 1 << 20}, {"n": 1 << 22}, {"n": 1 << 24}, {"n": 1 << 26}, {"n": (1 << 28) + 7}],
        },
        dtypes=("float32", "float16", "bfloat16"),
        flops=lambda s: s.n,
        bytes=lambda s: 3 * s.n * s.itemsize,
        min_flops=lambda s: s.n,  # one addition per output
    )
