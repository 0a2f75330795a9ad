import torch
import torch.nn as nn


class Model(nn.Module):
    """A tall matrix times one column vector: memory-bound, one long dot product per output row."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return a @ v


rows = 4096
K = 8192 * 8


def get_inputs():
    return [torch.rand(rows, K), torch.rand(K, 1)]


def get_init_inputs():
    return []
