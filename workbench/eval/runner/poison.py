"""Poisoning (docs/anti-cheating.md, cheat 1): memory a candidate allocates but never writes holds a pattern the judge
reads back (`poison_mask`). On a GPU the caching allocator is refilled with poisoned blocks before a call; on the CPU
c10's "junk fill" is on during the call."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
from collections.abc import Iterator
from typing import Any

import torch

from workbench.eval.wire.tensors import int_view, is_plain

#: c10's CPU junk-fill pattern, also written into the GPU cache so one detector covers both (a NaN as float32).
POISON_WORD = 0x7FEDBEEF

_MIB = 1 << 20


def poison_words(bits: torch.dtype) -> tuple[int, int]:
    """The values a poisoned element of integer type `bits` reads as (the word's two halves for 16-bit ones)."""
    if bits == torch.int32:
        return POISON_WORD, POISON_WORD
    if bits == torch.int64:
        return POISON_WORD << 32 | POISON_WORD, POISON_WORD << 32 | POISON_WORD
    return (POISON_WORD & 0xFFFF) - 0x10000, POISON_WORD >> 16


def poison_mask(t: torch.Tensor) -> torch.Tensor | None:
    """Elements whose bits are the poison pattern (memory never written since it was poisoned)."""
    bits = int_view(t)
    if bits is None:
        return None
    first, second = poison_words(bits.dtype)
    return bits == first if first == second else (bits == first) | (bits == second)


@functools.cache
def junk_fill_flag() -> Any:
    """c10's `caffe2_cpu_allocator_do_junk_fill` switch, or None where the library does not export it."""
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in ("libc10.so", "libc10.dylib", "c10.dll"):
        path = os.path.join(lib_dir, name)
        if not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
            junk = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_cpu_allocator_do_junk_fill")
            zero = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_cpu_allocator_do_zero_fill")
        except (OSError, ValueError):
            return None
        # c10 refuses both fills at once (it raises on every allocation): leave a zero-fill setup alone.
        return None if zero.value else junk
    return None

class Poison:
    """Makes memory a candidate allocates but never writes hold the poison pattern."""

    def __init__(self, device: str):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.junk = None if self.cuda else junk_fill_flag()

    def prepare(self, like: list[Any]) -> None:
        """Before a candidate call, after its inputs were cloned."""
        tensors = [t for t in like if is_plain(t) and t.numel()]
        if self.cuda:
            self._refill_cuda_cache(tensors)
        elif self.junk is None:
            self._leave_poisoned_cpu_chunks(tensors)

    @contextlib.contextmanager
    def during_call(self) -> Iterator[None]:
        if self.junk is None:
            yield
            return
        before = self.junk.value
        self.junk.value = True
        try:
            yield
        finally:
            self.junk.value = before

    def _refill_cuda_cache(self, tensors: list[torch.Tensor]) -> None:
        # Empty the cache; take every free fragment it still holds (best fit prefers them) at its exact size; add
        # 1 MiB blocks for small requests and one large block for the rest; poison all, free them into the cache.
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        dev = torch.device(self.device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        blocks = [torch.empty(size, dtype=torch.uint8, device=dev) for size in free_fragments(index)]
        need = sum(t.numel() * t.element_size() for t in tensors)
        free, _total = torch.cuda.mem_get_info(dev)
        # Room for the output and temporaries, while leaving the judge (another process on this GPU) its memory.
        big = min(max(2 * need, 32 * _MIB), free // 4) // (2 * _MIB) * (2 * _MIB)
        blocks += [torch.empty(_MIB, dtype=torch.uint8, device=dev) for _ in range(8)]
        if big >= 20 * _MIB:
            blocks.append(torch.empty(big, dtype=torch.uint8, device=dev))
        for b in blocks:
            b.view(torch.int32).fill_(POISON_WORD)
        torch.cuda.synchronize()
        del blocks

    def _leave_poisoned_cpu_chunks(self, tensors: list[torch.Tensor]) -> None:
        # Without junk fill: poisoned chunks of the likely sizes, freed last, are what malloc tends to hand out next.
        blocks = []
        for t in tensors:
            n = -(-t.numel() * t.element_size() // 4)
            blocks += [torch.full((n,), POISON_WORD, dtype=torch.int32) for _ in range(2)]
        del blocks

def free_fragments(device_index: int) -> list[int]:
    """Sizes of the free blocks the CUDA caching allocator holds on this device (empty where it cannot say)."""
    try:
        segments = torch.cuda.memory_snapshot()
        stream = torch.cuda.current_stream(device_index).cuda_stream  # blocks serve requests of their own stream
    except Exception:  # pragma: no cover - depends on the allocator backend
        return []
    return [b["size"] for seg in segments if seg.get("device") == device_index and seg.get("stream", 0) == stream
            for b in seg.get("blocks", []) if b.get("state") == "inactive" and b.get("size", 0) >= 512]
