"""GELU activation, exact (erf) form: an elementwise kernel with a transcendental per element.

We use the erf form (nn.GELU's default, approximate="none") rather than the tanh approximation so that a
kernel using the tanh shortcut is visibly wrong in fp32 (the two differ by up to ~5e-4).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

n = 1 << 26
dtype = torch.float32


class Model(nn.Module):
    """y = x * 0.5 * (1 + erf(x / sqrt(2))) for a vector of length n."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(n, dtype=dtype) * 3]


def get_init_inputs():
    return []


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "gelu",
        description="Exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), elementwise over n values.",
        sizes={"cpu": {"n": 8192}, "gpu": {"n": 1 << 26}},
        sweep={
            "cpu": [{"n": 1000}, {"n": 12345}],
            "gpu": [{"n": 1 << 20}, {"n": 1 << 22}, {"n": 1 << 24}, {"n": 1 << 26}, {"n": (1 << 28) + 7}],
        },
        dtypes=("float32", "float16", "bfloat16"),
        # scale, erf, add, two multiplies: 5 per element (erf counted as one operation).
        flops=lambda s: 5 * s.n,
        bytes=lambda s: 2 * s.n * s.itemsize,
        min_flops=lambda s: s.n,  # at least one operation per output
    )
