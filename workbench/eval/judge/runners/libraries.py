"""Which GPU libraries a runner loads before its first request, read from the sources it will run.

A runner is a fresh process per candidate, so its first convolution or GEMM would pay for loading cuDNN or cuBLAS
and making its handle. A runner told which libraries its sources use loads them right after Ready
(`runner/library_warmup.py`), while the judge does its own work; its first request waits for the warm-up, so nothing
it measures overlaps it. The reading is a text search that only decides what is loaded early (a miss is loaded by
the first call); the candidate's and the reference's runners are told alike, so both sides of a speedup start alike.
"""

from __future__ import annotations

import re

#: cuDNN: convolutions (transposed too), batch and instance norms, recurrent layers.
_CUDNN = re.compile(r"[Cc]onv(?:_?[Tt]ranspose)?[123]d|BatchNorm|batch_norm|InstanceNorm|instance_norm"
                    r"|\b(?:LSTM|GRU|RNN)\b|cudnn")
#: cuBLAS: linear layers, matrix products, attention, recurrent layers, `a @ b` (not a decorator's `@`).
_CUBLAS = re.compile(r"\bLinear\b|\blinear\(|\bBilinear\b|\bmatmul\b|\b(?:bmm|mm|addmm|baddbmm|addbmm|einsum|"
                     r"tensordot|chain_matmul|mv|addmv)\(|MultiheadAttention|scaled_dot_product_attention"
                     r"|Transformer|\b(?:LSTM|GRU|RNN)\b|cublas|[\w)\]][ \t]*@[ \t]*[\w(]")


def libraries_for(device: str, *sources: str) -> tuple[str, ...]:
    """The libraries a runner on `device` warms up for `sources`: none off the GPU; else the CUDA context always,
    then cuBLAS and cuDNN when a source names what uses them."""
    if not device.startswith("cuda"):
        return ()
    text = "\n".join(sources)
    found = ["cuda"]
    if _CUBLAS.search(text):
        found.append("cublas")
    if _CUDNN.search(text):
        found.append("cudnn")
    return tuple(found)
