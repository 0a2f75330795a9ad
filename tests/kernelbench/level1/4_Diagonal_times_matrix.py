import torch
import torch.nn as nn


class Model(nn.Module):
    """diag(d) @ B written as a dense matmul with the diagonal matrix built explicitly. Every row of B is scaled by
    one entry of d, so a row scaling computes the same result with N * M multiplications instead of 2 * N^2 * M."""

    def __init__(self):
        super().__init__()

    def forward(self, d: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(d) @ b


N = 4096
M = 4096


def get_inputs():
    return [torch.rand(N), torch.rand(N, M)]


def get_init_inputs():
    return []
