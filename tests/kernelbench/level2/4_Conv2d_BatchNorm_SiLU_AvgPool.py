import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Convolution, inference-mode batch normalization, SiLU, then 2x2 average pooling."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(F.silu(self.bn(self.conv(x))), self.pool)


batch_size = 64
in_channels = 16
out_channels = 64
height = 130
width = 130
kernel_size = 3
pool = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool]
