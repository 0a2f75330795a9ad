import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2-D convolution with a 3x5 kernel, stride 2 and padding that keeps the borders, with a bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int, padding: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = (3, 5)
stride = 2
padding = (1, 2)
height = 256
width = 256 + 64


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
