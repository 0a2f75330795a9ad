"""2-D convolution, NCHW, with a weight and a bias: a matmul in disguise (implicit GEMM over C_in*kh*kw).

Weight and bias are forward inputs rather than nn.Conv2d parameters so that they are drawn fresh for every
correctness round, from every input distribution, like the image.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
stride = 1
padding = 1
dtype = torch.float32


class Model(nn.Module):
    """y = conv2d(x, weight, bias, stride, padding); x (N, C_in, H, W), weight (C_out, C_in, k, k), bias (C_out,)."""

    def __init__(self, stride: int = 1, padding: int = 1):
        super().__init__()
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, weight, bias, stride=self.stride, padding=self.padding)


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width, dtype=dtype)
    # Scaled like a trained layer's weights so outputs stay O(1) for any channel count.
    fan_in = in_channels * kernel_size * kernel_size
    weight = torch.randn(out_channels, in_channels, kernel_size, kernel_size, dtype=dtype) / fan_in**0.5
    bias = torch.randn(out_channels, dtype=dtype)
    return [x, weight, bias]


def get_init_inputs():
    return [stride, padding]


# ==== workbench task metadata (not part of the KernelBench reference) ====


def _out(extent: int, s) -> int:
    return (extent + 2 * s.padding - s.kernel_size) // s.stride + 1


def task():
    from workbench.tasks._builtin import builtin_task

    def flops(s) -> int:
        outputs = s.batch_size * s.out_channels * _out(s.height, s) * _out(s.width, s)
        return 2 * outputs * s.in_channels * s.kernel_size**2 + outputs  # multiply-adds, then the bias

    def min_flops(s) -> float:
        """Half a multiply per output and input channel: Winograd's and FFT convolutions approach one multiply per
        output and input channel for large tiles, and a fast matmul over the channels halves that at most."""
        return s.batch_size * s.out_channels * _out(s.height, s) * _out(s.width, s) * s.in_channels / 2

    def nbytes(s) -> int:
        image = s.batch_size * s.in_channels * s.height * s.width
        weight = s.out_channels * s.in_channels * s.kernel_size**2 + s.out_channels
        out = s.batch_size * s.out_channels * _out(s.height, s) * _out(s.width, s)
        return (image + weight + out) * s.itemsize

    return builtin_task(
        __file__,
        "conv2d",
        description="NCHW 2-D convolution (3x3, stride 1, padding 1 by default) with weight and bias inputs.",
        sizes={
            "cpu": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 12, "width": 12},
            "gpu": {"batch_size": 16, "in_channels": 64, "out_channels": 128, "height": 128, "width": 128,
                    "dtype": "float16"},
        },
        sweep={
            "cpu": [
                {"batch_size": 1, "in_channels": 3, "out_channels": 5, "height": 7, "width": 9},
                {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 10, "width": 6, "stride": 2},
            ],
            "gpu": [
                {"batch_size": 32, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56, "dtype": "float16"},
                {"batch_size": 16, "in_channels": 64, "out_channels": 128, "height": 128, "width": 128,
                 "dtype": "float16"},
                {"batch_size": 8, "in_channels": 256, "out_channels": 256, "height": 28, "width": 28,
                 "dtype": "bfloat16"},
                {"batch_size": 16, "in_channels": 3, "out_channels": 64, "height": 224, "width": 224,
                 "stride": 2, "dtype": "float16"},
                {"batch_size": 16, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56, "dtype": "float32"},
            ],
        },
        dtypes=("float32", "float16", "bfloat16"),
        # fp32: sums of C_in*k*k products; rounding grows with that length, as for matmul (worst honest
        # error seen on an H100 with heavy-tailed inputs and 576-long sums: 1.9e-4).
        tolerances={"float32": (5e-4, 1e-5)},
        flops=flops,
        bytes=nbytes,
        min_flops=min_flops,
        notes=("On a GPU the eager fp32 reference may use TF32 in cuDNN (torch.backends.cudnn.allow_tf32 is on "
               "by default); correctness is always judged against a float64 reference.",),
    )
