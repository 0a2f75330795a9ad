"""Small tensor helpers shared by the judge and the runner (which imports no checking code)."""

from __future__ import annotations

import copy
from typing import Any

import torch


def as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]

def is_plain(t: Any) -> bool:
    """Exactly torch.Tensor: anything else may run code on access, so it is never touched."""
    return type(t) is torch.Tensor

def clone_inputs(inputs: list[Any]) -> list[Any]:
    """Fresh memory with the same values (nested lists and tuples of tensors included)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append(x.detach().clone())
        elif isinstance(x, (list, tuple)):
            out.append(type(x)(clone_inputs(list(x))))
        else:
            out.append(copy.deepcopy(x))
    return out

def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)

def same_bits(a: Any, b: Any) -> bool:
    """Bit-exact equality: NaN payloads compare equal, -0.0 differs from 0.0."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (is_plain(a) and is_plain(b)) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(raw_bytes(a).cpu(), raw_bytes(b).cpu())) if a.device != b.device else \
            bool(torch.equal(raw_bytes(a), raw_bytes(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b, strict=False))
    try:
        return bool(a == b)
    except Exception:
        return False

def to64(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64)
    return type(x)(to64(v) for v in x) if isinstance(x, (list, tuple)) else x

def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


#: An output above this size gets no extra copies in the judge (the GPU has no room for them beside the rest).
LARGE_OUTPUT_BYTES = 1 << 30

#: Bytes a process's CUDA caching allocator may hold unused before `release_unused` gives them back.
UNUSED_CACHE_BYTES = 256 << 20


def release_unused(device: str) -> None:
    """Give the GPU memory this process caches unused back when it is much (the other side may need it)."""
    if _unused_bytes(device) > UNUSED_CACHE_BYTES:
        torch.cuda.empty_cache()


def _unused_bytes(device: str) -> int:
    if not device.startswith("cuda") or not torch.cuda.is_initialized():
        return 0
    dev = torch.device(device)
    return torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)


#: Free device memory `release_if_short` wants beside what the judge caches unused before it keeps the cache.
SHORT_MARGIN_BYTES = 1 << 30


def release_if_short(device: str) -> bool:
    """`release_unused` only where free memory is short (the GPU clears released memory while the next batch runs:
    benchmarks/README.md); whether it released."""
    unused = _unused_bytes(device)
    if unused <= UNUSED_CACHE_BYTES or torch.cuda.mem_get_info(torch.device(device))[0] >= unused + SHORT_MARGIN_BYTES:
        return False
    torch.cuda.empty_cache()
    return True


def int_view(t: torch.Tensor) -> torch.Tensor | None:
    kind = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(t.element_size())
    return None if kind is None or t.is_complex() else t.detach().contiguous().view(kind)

def bytes_per_element(t: torch.Tensor) -> torch.Tensor:
    """Elements as integers of the same width, so equality is bitwise (NaN payloads included)."""
    view = int_view(t)
    return view if view is not None else t.detach()

def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")

def real_view(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


def all_finite(out: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in as_list(out)
               if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()))
