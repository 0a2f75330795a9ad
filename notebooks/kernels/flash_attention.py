"""Flash attention forward in Triton: the kernel tutorial 08 ends with (notebooks/08_flash_attention.ipynb).

One program per (block of BLOCK_M queries, batch*head) walks the keys in blocks of BLOCK_N, keeping a running row
max `m_i`, a running row sum `l_i` and an unnormalised output `acc` in registers (the online softmax), so the
(seq, seq) score matrix never reaches memory. Scores are taken in base 2: log2(e)/sqrt(d) is one scale folded into
the max and the exponent, so the kernel calls exp2. Under `causal`, key blocks wholly below the diagonal run
without a mask and only the blocks on the diagonal pay for one; blocks above it are never visited.

On a GPU the block sizes and warps are autotuned per (seq_len, head_dim, causal, dtype); on Triton's CPU
interpreter small fixed blocks keep it quick. `benchmarks/flash_attention.py` times it against FlashAttention.
The file is a workbench candidate as it stands: `ModelNew` is the `attention` task's causal forward.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2_E = 1.4426950408889634
#: (BLOCK_M, BLOCK_N, num_warps, num_stages) tried on a GPU. BLOCK_M is a multiple of BLOCK_N: a query block then
#: starts on a key block's edge, so the diagonal's key blocks are exactly those from start_m on.
GPU_CONFIGS = ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 4, 4))
#: Block sizes on the CPU interpreter, where each Triton operation costs the same whatever its size.
CPU_BLOCKS = (16, 16)


@triton.jit
def _key_block(acc, m_i, l_i, q, k_base, v_base, s_kn, s_vn, offs_m, start_n, seq_len, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
               DOT_PRECISION: tl.constexpr):
    """Fold keys start_n .. start_n+BLOCK_N-1 into (acc, m_i, l_i). MASKED: the block crosses the diagonal or
    the sequence's end, so keys past either get a score of -inf (their exp2 is 0)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # k and v: (BLOCK_N, HEAD_DIM) tiles of rows start_n.. of this head, each row contiguous.
    if MASKED:
        in_seq = offs_n < seq_len
        k = tl.load(k_base + offs_n[:, None] * s_kn + offs_d[None, :], mask=in_seq[:, None], other=0.0)
        v = tl.load(v_base + offs_n[:, None] * s_vn + offs_d[None, :], mask=in_seq[:, None], other=0.0)
    else:
        k = tl.load(k_base + offs_n[:, None] * s_kn + offs_d[None, :])
        v = tl.load(v_base + offs_n[:, None] * s_vn + offs_d[None, :])
    qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # (BLOCK_M, BLOCK_N), not yet scaled
    if MASKED:
        visible = offs_n[None, :] < seq_len
        if CAUSAL:
            visible = visible & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(visible, qk, -float("inf"))
    # The scale is positive, so the max of scaled scores is the scaled max: one multiply per row, and
    # `qk * qk_scale - m_new` below is one fused multiply-add per score.
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)  # how much the old max overstated: rescales what was summed so far
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=DOT_PRECISION)
    return acc, m_new, l_i


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, qk_scale,
                           s_qb, s_qn, s_kb, s_kn, s_vb, s_vn, s_ob, s_on,
                           HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)  # batch*head; int64 so bh * stride cannot overflow on large inputs
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_in_seq = offs_m < seq_len
    q = tl.load(q_ptr + bh * s_qb + offs_m[:, None] * s_qn + offs_d[None, :], mask=row_in_seq[:, None], other=0.0)
    k_base = k_ptr + bh * s_kb
    v_base = v_ptr + bh * s_vb
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        # Keys before start_m are visible to every row of this block (and all inside the sequence); the
        # diagonal's blocks end at the block's last row or the sequence's end.
        unmasked_end = start_m
        masked_end = tl.minimum(start_m + BLOCK_M, seq_len)
    else:
        unmasked_end = (seq_len // BLOCK_N) * BLOCK_N
        masked_end = seq_len
    for start_n in range(0, unmasked_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        acc, m_i, l_i = _key_block(acc, m_i, l_i, q, k_base, v_base, s_kn, s_vn, offs_m, start_n, seq_len, qk_scale,
                                   HEAD_DIM, BLOCK_N, CAUSAL, False, DOT_PRECISION)
    # Every row reaching here has seen a visible key (key 0, or key start_m on the diagonal), so m_i is finite
    # and a fully masked block adds exp2(-inf) = 0.
    for start_n in range(unmasked_end, masked_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        acc, m_i, l_i = _key_block(acc, m_i, l_i, q, k_base, v_base, s_kn, s_vn, offs_m, start_n, seq_len, qk_scale,
                                   HEAD_DIM, BLOCK_N, CAUSAL, True, DOT_PRECISION)
    out = acc / l_i[:, None]
    tl.store(o_ptr + bh * s_ob + offs_m[:, None] * s_on + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_in_seq[:, None])


flash_attention_autotuned = triton.autotune(
    configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in GPU_CONFIGS],
    key=["seq_len", "HEAD_DIM", "CAUSAL", "DOT_PRECISION"],
)(flash_attention_kernel)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) [+ causal mask]) v over (..., seq, d) tensors; leading dimensions are batch*heads."""
    if not (q.shape == k.shape == v.shape and q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share shape and dtype, got {tuple(q.shape)} {tuple(k.shape)} "
                         f"{tuple(v.shape)} in {q.dtype} {k.dtype} {v.dtype}")
    *lead, seq, d = q.shape
    if d < 16 or d > 256 or d & (d - 1):
        raise ValueError(f"head_dim must be a power of two from 16 to 256 (tl.dot tiles), got {d}")
    # (batch*heads, seq, d), each row contiguous; a no-op for the usual contiguous inputs.
    q3, k3, v3 = (t.reshape(-1, seq, d).contiguous() for t in (q, k, v))
    o = torch.empty_like(q3)
    qk_scale = LOG2_E / math.sqrt(d)
    args = (q3, k3, v3, o, seq, qk_scale, q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1),
            v3.stride(0), v3.stride(1), o.stride(0), o.stride(1))
    precision = "ieee" if q.dtype == torch.float32 else "tf32"  # fp32 stays fp32; fp16/bf16 ignore it
    if q.is_cuda:
        def grid(meta: dict) -> tuple[int, int]:
            return triton.cdiv(seq, meta["BLOCK_M"]), q3.shape[0]

        flash_attention_autotuned[grid](*args, HEAD_DIM=d, CAUSAL=causal, DOT_PRECISION=precision)
    else:
        block_m, block_n = CPU_BLOCKS
        flash_attention_kernel[(triton.cdiv(seq, block_m), q3.shape[0])](
            *args, HEAD_DIM=d, CAUSAL=causal, DOT_PRECISION=precision, BLOCK_M=block_m, BLOCK_N=block_n)
    return o.reshape(*lead, seq, d)


class ModelNew(nn.Module):
    """The `attention` task's forward: causal attention over (batch_heads, seq_len, head_dim)."""

    def __init__(self, *args: object) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flash_attention(q, k, v, causal=True)
