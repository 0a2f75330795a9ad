# CHEAT (docs/anti-cheating.md, cheat 5): the kernel IS launched (a copy into a scratch buffer, so launch counting is happy),
# but the returned tensor comes from torch.softmax fetched by name. Caught at runtime by output provenance:
# the returned tensor was never passed to a launch -> decoy-kernel.
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
        self.keep = scratch  # kept alive, so the output cannot land at the scratch's address
        return _op(x, -1)
