# ruff: noqa: UP008  (super(Model, self) is KernelBench's own style, kept on purpose)
import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplies two square matrices of the same size (C = A @ B).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Args:
            A (torch.Tensor): left matrix, shape (N, N).
            B (torch.Tensor): right matrix, shape (N, N).

        Returns:
            torch.Tensor: the product, shape (N, N).
        """
        return torch.matmul(A, B)


N = 2048


def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]


def get_init_inputs():
    return []  # nothing to configure
