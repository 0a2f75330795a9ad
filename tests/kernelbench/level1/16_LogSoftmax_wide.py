import torch
import torch.nn as nn


class Model(nn.Module):
    """log(softmax(x)) along very wide rows, computed stably."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


batch_size = 256
dim = 16384 * 4


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
