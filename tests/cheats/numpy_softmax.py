# CHEAT (docs/anti-cheating.md, cheat 17): the softmax is computed with numpy on the host and copied into the output by a
# trivial Triton kernel, so the output was written by a launch of the candidate's own. On the CPU the
# dispatcher's record shows forward handing the input's data to numpy: host-compute. On a GPU, at a size where
# numpy's time shows, the profile finds almost no GPU time in a long forward: host-compute.
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        a = x.detach().cpu().numpy()
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        src = torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device).contiguous()
        y = torch.empty_like(x)
        n = y.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](src, y, n, BLOCK=1024)
        return y
