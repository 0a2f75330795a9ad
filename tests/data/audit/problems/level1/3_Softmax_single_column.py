"""A KernelBench-format problem written for the audit tests, degenerate on purpose: a softmax over a dimension
of size 1 is 1.0 whatever the input, so the problem cannot tell a kernel from a constant."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over dim 1 of a (batch, 1) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 256


def get_inputs():
    return [torch.randn(batch_size, 1)]


def get_init_inputs():
    return []
