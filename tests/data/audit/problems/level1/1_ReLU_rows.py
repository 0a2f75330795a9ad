"""A KernelBench-format problem written for the audit tests: ReLU over a batch of rows."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of every element."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 64
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
