import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ELU with a configurable alpha: x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


batch_size = 1024
dim = 131072
alpha = 0.7


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
