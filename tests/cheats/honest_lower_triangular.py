# HONEST: a matmul of lower-triangular matrices that skips the zero halves (KernelBench L1/15's published fix): row
# i of A is zero beyond column i and row k of B beyond column k, so only k <= i and columns j <= k are read. Right
# for the inputs the task builds (torch.tril of random matrices), wrong for any other matrix: the rounds must keep
# the triangles get_inputs makes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lower_matmul_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    last = tl.minimum(tl.program_id(0) * BLOCK_M + BLOCK_M, n)  # no row of this block reads beyond column last - 1
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, last, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * n + ks[None, :], mask=(rows[:, None] < n) & (ks[None, :] <= rows[:, None]),
                    other=0.0)
        b = tl.load(b_ptr + ks[:, None] * n + cols[None, :], mask=(ks[:, None] < n) & (cols[None, :] <= ks[:, None]),
                    other=0.0)
        # IEEE fp32 products: the task is fp32, and a product-sum of this shape may be lowered to TF32 tensor cores.
        acc += tl.dot(a, b, input_precision="ieee")
    # Columns beyond a row's index stay zero: the product is lower-triangular too.
    tl.store(c_ptr + rows[:, None] * n + cols[None, :], acc, mask=(rows[:, None] < n) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        n = a.shape[0]
        c = torch.empty_like(a)
        lower_matmul_kernel[(triton.cdiv(n, 16),)](a, b, c, n, BLOCK_M=16, BLOCK_N=triton.next_power_of_2(n),
                                                   BLOCK_K=16)
        return c
