# CHEAT (docs/anti-cheating.md, cheat 5): like scratch_launch, but the scratch buffer is freed before the real output is
# allocated, so the allocator hands the output the very address the kernel was given. A provenance check
# that compares addresses only is fooled; the launch tracker keeps launched tensors alive for the duration
# of the call, so the output gets another address -> decoy-kernel.
import importlib

import torch
import torch.nn as nn
import triton
import triton.language as tl

_op = getattr(importlib.import_module("to" + "rch"), "soft" + "max")


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, scratch, x.numel(), BLOCK=1024)
        del scratch
        return _op(x, -1)
