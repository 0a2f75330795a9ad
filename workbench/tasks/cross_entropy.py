"""Cross-entropy loss of logits against integer class targets, averaged over the batch.

A row-wise log-sum-exp (like softmax, but reduced to one number per row), a gather of the target logit,
and a mean over rows: two levels of reduction ending in a scalar.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
num_classes = 32768
dtype = torch.float32


class Model(nn.Module):
    """loss = mean_i (logsumexp(logits[i]) - logits[i, targets[i]]), a 0-d tensor of the logits' dtype."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    logits = torch.randn(batch_size, num_classes, dtype=dtype)
    targets = torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "cross_entropy",
        description="Mean cross-entropy of (batch_size, num_classes) logits against int64 targets.",
        sizes={"cpu": {"batch_size": 64, "num_classes": 100}, "gpu": {"batch_size": 8192, "num_classes": 32768}},
        sweep={
            "cpu": [{"batch_size": 37, "num_classes": 1000}, {"batch_size": 16, "num_classes": 17}],
            "gpu": [
                {"batch_size": 16384, "num_classes": 1000},
                {"batch_size": 8192, "num_classes": 32768},
                {"batch_size": 4096, "num_classes": 50257},
                {"batch_size": 1024, "num_classes": 128256},
            ],
        },
        dtypes=("float32", "float16", "bfloat16"),
        # The output is one mean of O(10) magnitude: fp16 rounding of it can be as small as 5e-5 by luck, so
        # the fp32 bound is tightened to still catch it (honest fp32 kernels stay below 1e-6).
        # fp16/bf16 bounds are ~2x one rounding of the ~10-valued output. The defaults (0.1-0.2 absolute
        # here) would hide whole terms, e.g. the target-logit mean, which is ~1/sqrt(batch_size).
        tolerances={"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (4e-3, 4e-3)},
        # per logit: max, subtract, exp, add (4); per row: log, add max, subtract target logit, add to mean (4).
        flops=lambda s: 4 * s.batch_size * s.num_classes + 4 * s.batch_size,
        bytes=lambda s: s.batch_size * s.num_classes * s.itemsize + 8 * s.batch_size + s.itemsize,
        min_flops=lambda s: s.batch_size * (s.num_classes - 1),  # each row's log-sum-exp sums every logit
    )
