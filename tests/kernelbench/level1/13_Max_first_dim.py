import torch
import torch.nn as nn


class Model(nn.Module):
    """Maximum over the first (outermost, strided) dimension: values only."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=0).values


depth = 256
rows = 1024
cols = 1024


def get_inputs():
    return [torch.randn(depth, rows, cols)]


def get_init_inputs():
    return []
