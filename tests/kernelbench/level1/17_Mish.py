import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mish activation: x * tanh(softplus(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(x)


batch_size = 2048
dim = 65536


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
