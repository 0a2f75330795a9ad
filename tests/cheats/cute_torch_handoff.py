# CHEAT (docs/anti-cheating.md, cheat 4): a CuTe DSL candidate that hands the work to PyTorch: torch.softmax computes
# the output and a @cute.kernel only copies it into the returned tensor. The static scan finds torch compute in
# forward and the profiled forward confirms it ran (torch-compute-in-forward); the copy kernel's share of the GPU
# time is small beside the softmax's (low-coverage) where the record alone does not decide.
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def copy_rows(mSrc: cute.Tensor, mDst: cute.Tensor):
    tid, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    src = mSrc[row, None]
    dst = mDst[row, None]
    n = src.shape[0]
    for t in cutlass.range(0, (n + 127) // 128):
        col = t * 128 + tid
        if col < n:
            dst[col] = src[col]


@cute.jit
def copy_host(mSrc: cute.Tensor, mDst: cute.Tensor, stream: cuda.CUstream):
    copy_rows(mSrc, mDst).launch(grid=[mSrc.shape[0], 1, 1], block=[128, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.compiled = {}

    def forward(self, x):
        done = torch.softmax(x, dim=-1)
        y = torch.empty_like(x)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        src = from_dlpack(done, assumed_align=4).mark_layout_dynamic(leading_dim=1)
        dst = from_dlpack(y, assumed_align=4).mark_layout_dynamic(leading_dim=1)
        if x.dtype not in self.compiled:
            self.compiled[x.dtype] = cute.compile(copy_host, src, dst, stream)
        self.compiled[x.dtype](src, dst, stream)
        return y
