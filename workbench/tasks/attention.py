"""Causal scaled-dot-product attention for one head dimension, heads folded into the batch.

The reference materializes the (seq, seq) score matrix; a fused (flash-style) kernel never does, which is
where its speed comes from.
"""

import math

import torch
import torch.nn as nn

batch_heads = 64
seq_len = 2048
head_dim = 64
dtype = torch.float32


class Model(nn.Module):
    """out = softmax(q @ k^T / sqrt(head_dim) + causal mask) @ v, q/k/v of shape (batch_heads, seq_len, head_dim)."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        future = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=q.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_heads, seq_len, head_dim)
    return [torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)]


def get_init_inputs():
    return []


# ==== workbench task metadata (not part of the KernelBench reference) ====


def task():
    from workbench.tasks._builtin import builtin_task

    return builtin_task(
        __file__,
        "attention",
        description="Causal attention softmax(q k^T / sqrt(d), causal) v over (batch_heads, seq_len, head_dim).",
        sizes={
            "cpu": {"batch_heads": 4, "seq_len": 64, "head_dim": 16},
            "gpu": {"batch_heads": 64, "seq_len": 2048, "head_dim": 64, "dtype": "float16"},
        },
        sweep={
            "cpu": [{"batch_heads": 2, "seq_len": 50, "head_dim": 16}, {"batch_heads": 3, "seq_len": 33, "head_dim": 32}],
            "gpu": [
                {"batch_heads": 128, "seq_len": 1024, "head_dim": 64, "dtype": "float16"},
                {"batch_heads": 64, "seq_len": 2048, "head_dim": 64, "dtype": "float16"},
                {"batch_heads": 32, "seq_len": 4096, "head_dim": 64, "dtype": "bfloat16"},
                {"batch_heads": 48, "seq_len": 1000, "head_dim": 64, "dtype": "float16"},
                {"batch_heads": 32, "seq_len": 2048, "head_dim": 64, "dtype": "float32"},
            ],
        },
        dtypes=("float32", "float16", "bfloat16"),
        # Heavy-tailed q and k make scores of several hundred, where fp32 rounding of a score (~1e-5
        # absolute) becomes a relative error in its exp: an honest fp32 kernel reached 8e-5 on an H100.
        tolerances={"float32": (3e-4, 1e-5)},
        # The two matmuls over the causal half (seq*(seq+1)/2 query-key pairs), 2*head_dim each; the softmax's
        # few operations per score are left out, as is customary for attention FLOP counts.
        flops=lambda s: 4 * s.batch_heads * s.head_dim * s.seq_len * (s.seq_len + 1) // 2,
        bytes=lambda s: 4 * s.batch_heads * s.seq_len * s.head_dim * s.itemsize,
        # A quarter of the two causal matmuls (q k^T and p v over the lower triangle), as for matmul.
        min_flops=lambda s: s.batch_heads * s.head_dim * s.seq_len * (s.seq_len + 1) // 2,
    )
