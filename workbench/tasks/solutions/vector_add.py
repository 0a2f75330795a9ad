"""Reference Triton solution for `vector_add`: one program per BLOCK elements, masked tail."""

from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        n = a.numel()
        # Interpreter: ~0.4 ms per program, so few large-ish programs; GPU: 4K elements per program.
        block = 4096 if a.is_cuda else 256
        add_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block, num_warps=8 if a.is_cuda else 4)
        return out
