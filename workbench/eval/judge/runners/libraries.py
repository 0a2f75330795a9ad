"""Which GPU libraries a runner loads before its first request, read from the sources it will run.

Why: a runner is a fresh process per candidate, so the first cuDNN convolution in it loads cuDNN and makes its
handle (about a second on an H100, in the first correctness call of a KernelBench conv problem) and the first GEMM
makes cuBLAS's (0.15 s). In a harness that judges every kernel in one process (KernelBench's), those costs are paid
once per session. A runner told which libraries its sources use loads them right after it says Ready
(`runner/library_warmup.py`), while the judge builds the reference, draws the timing's inputs and measures the
reference's estimate; the runner's first request waits for the warm-up, so nothing it measures overlaps it.

The reading is a text search, and it only decides what is loaded early: a library it misses is loaded by the first
call, as before, and one it names wrongly costs the runner a few hundred milliseconds that usually overlap the
judge's own work. Every runner of a task is told the same way (the candidate's and the reference's), so both sides of
a speedup start alike.
"""

from __future__ import annotations

import re

#: cuDNN: convolutions (transposed too), batch and instance norms (cuDNN's batch norm in eval mode) and recurrent
#: layers.
_CUDNN = re.compile(r"[Cc]onv(?:_?[Tt]ranspose)?[123]d|BatchNorm|batch_norm|InstanceNorm|instance_norm"
                    r"|\b(?:LSTM|GRU|RNN)\b|cudnn")
#: cuBLAS: linear layers, matrix products, attention and recurrent layers; `a @ b` on one line (a decorator's `@`
#: starts its line).
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
