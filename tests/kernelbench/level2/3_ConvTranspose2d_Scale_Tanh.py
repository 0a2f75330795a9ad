import torch
import torch.nn as nn


class Model(nn.Module):
    """A strided transposed convolution, a constant scale, then tanh."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, scale: float):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x) * self.scale)


batch_size = 32
in_channels = 64
out_channels = 32
side = 64
kernel_size = 3
stride = 2
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, side, side)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, scale]
