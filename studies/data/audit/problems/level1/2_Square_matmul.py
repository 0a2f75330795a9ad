"""A KernelBench-format problem written for the audit example: C = A @ B in float32."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """A single square matrix multiplication."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 128


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
