import torch
import torch.nn as nn


class Model(nn.Module):
    """2-D max pooling with a 3x3 window, stride 2, padding 1 and dilation 2."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 3
stride = 2
padding = 1
dilation = 2


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
