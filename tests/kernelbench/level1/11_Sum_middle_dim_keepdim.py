import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over the middle dimension of a 3-D tensor, keeping it as a dimension of size one."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 64
length = 4096
features = 4096 - 1
reduce_over = 1


def get_inputs():
    return [torch.rand(batch_size, length, features)]


def get_init_inputs():
    return [reduce_over]
