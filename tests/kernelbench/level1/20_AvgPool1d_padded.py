import torch
import torch.nn as nn


class Model(nn.Module):
    """1-D average pooling, window 8, stride 4, zero padding 2 counted in the average."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 64
channels = 128
length = 65536
kernel_size = 8
stride = 4
padding = 2


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding]
