# ruff: noqa: UP008  (super(Model, self) is KernelBench's own style, kept on purpose)
import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Sums a tensor over one dimension, keeping that dimension with size one.
    """

    def __init__(self, dim: int):
        """
        Args:
            dim (int): the dimension to reduce.
        """
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): input of any shape.

        Returns:
            torch.Tensor: the sums, with `dim` of size one.
        """
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16
dim1 = 256
dim2 = 256
reduce_dim = 1


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
