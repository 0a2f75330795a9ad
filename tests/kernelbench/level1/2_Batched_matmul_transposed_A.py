import torch
import torch.nn as nn


class Model(nn.Module):
    """A batch of products A_i^T @ B_i, where each A_i is stored as (K, M) and each B_i as (K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a.transpose(1, 2), b)


batch = 64
M = 256
K = 512 * 2
N = 384


def get_inputs():
    return [torch.rand(batch, K, M), torch.rand(batch, K, N)]


def get_init_inputs():
    return []
