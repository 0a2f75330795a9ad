import torch
import torch.nn as nn


class Model(nn.Module):
    """A bias-free convolution, then a learned per-channel bias, then ReLU: the epilogue a fused kernel absorbs."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


batch_size = 64
in_channels = 32
out_channels = 64
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
