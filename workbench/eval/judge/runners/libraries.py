"""Which GPU libraries a fresh runner loads right after Ready (`runner/library_warmup.py`), read from the sources it
will run by a text search (a miss is loaded by the first call); both sides of a speedup are told alike."""

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
    """None off the GPU; else the CUDA context, and cuBLAS and cuDNN where a source names what uses them."""
    if not device.startswith("cuda"):
        return ()
    text = "\n".join(sources)
    return ("cuda", *(name for name, uses in (("cublas", _CUBLAS), ("cudnn", _CUDNN)) if uses.search(text)))
