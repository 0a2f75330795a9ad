# CUDA C++ softmax over the rows of a 2-D float32 tensor (KernelBench level1/23_Softmax: softmax(x, dim=1)),
# built with load_inline: one block of 256 threads per row, block reductions through shared memory.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ float block_reduce(float v, float* shared, bool take_max) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, offset);
        v = take_max ? fmaxf(v, other) : v + other;
    }
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float r = shared[0];
    for (int w = 1; w < blockDim.x / 32; ++w) r = take_max ? fmaxf(r, shared[w]) : r + shared[w];
    __syncthreads();
    return r;
}

__global__ void softmax_rows_kernel(const float* x, float* y, int n) {
    __shared__ float shared[32];
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce(m, shared, true);
    float s = 0.f;
    for (int c = threadIdx.x; c < n; c += blockDim.x) s += expf(xr[c] - m);
    s = block_reduce(s, shared, false);
    float inv = 1.f / s;
    for (int c = threadIdx.x; c < n; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int rows = x.size(0), n = x.size(1);
    softmax_rows_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x);"

ext = load_inline(name="kwb_softmax_rows", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["softmax_rows"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_rows(x.contiguous())
