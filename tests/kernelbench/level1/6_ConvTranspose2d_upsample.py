import torch
import torch.nn as nn


class Model(nn.Module):
    """A transposed convolution that doubles the spatial size (kernel 4, stride 2, padding 1), without bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(x)


batch_size = 16
in_channels = 64
out_channels = in_channels // 2
kernel_size = 4
stride = 2
padding = 1
side = 128


def get_inputs():
    return [torch.rand(batch_size, in_channels, side, side)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
