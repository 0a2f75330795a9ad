import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B^T with A of shape (M, K) and B stored row-major as (N, K): the layout of a linear layer's weight."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b.T)


M = 1024 * 2
K = 4096
N = 2 * M


def get_inputs():
    return [torch.rand(M, K), torch.rand(N, K)]


def get_init_inputs():
    return []
