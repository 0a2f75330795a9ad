"""Shared memory between the judge and a runner, the only way data crosses the trust boundary: on the CPU a memfd; on a
GPU a driver allocation (cuMemAlloc, never torch's caching allocator, since a handle opens the whole allocation)
exported as a CUDA IPC handle, else host memfds staged by the runner (`Result.protocol["transport"]`)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import mmap
import os
import tempfile
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from workbench.eval.wire.runner_messages import BufferInfo, TensorRef
from workbench.eval.wire.tensors import dtype_name

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64, torch.complex128)}
for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _DTYPES[_name] = getattr(torch, _name)


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unsupported dtype {name!r} in shared memory") from None


class _IpcMemHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed *by value* to cuIpcOpenMemHandle."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class _Driver:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcMemHandle), ctypes.c_uint64]
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcMemHandle, ctypes.c_uint]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        self.lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"CUDA driver call {what} failed with error {code}")

    def ensure_context(self, device: int) -> None:
        torch.cuda.set_device(device)
        torch.empty(1, device=f"cuda:{device}")
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise RuntimeError("no current CUDA context after torch initialised the device")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)

    def export(self, ptr: int) -> str:
        handle = _IpcMemHandle()
        self.check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ptr), "cuIpcGetMemHandle")
        return bytes(ctypes.string_at(ctypes.addressof(handle), 64)).hex()

    def open(self, handle_hex: str) -> int:
        raw = bytes.fromhex(handle_hex)
        if len(raw) != 64:
            raise ValueError("a CUDA IPC handle has 64 bytes")
        handle = _IpcMemHandle.from_buffer_copy(raw)
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")
        return ptr.value

    def close(self, ptr: int) -> None:
        self.lib.cuIpcCloseMemHandle(ptr)


@functools.cache
def driver() -> _Driver:
    return _Driver()


def _cuda_bytes(ptr: int, nbytes: int, device: int) -> torch.Tensor:
    """A device pointer presented to torch through __cuda_array_interface__."""
    interface = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": None}
    return torch.as_tensor(SimpleNamespace(__cuda_array_interface__=interface), device=f"cuda:{device}")


def _memfd(nbytes: int) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kwb-shared", os.MFD_CLOEXEC if hasattr(os, "MFD_CLOEXEC") else 0)
    else:  # macOS: an unlinked temporary file does the same job
        fd, path = tempfile.mkstemp(prefix="kwb-shared-")
        os.unlink(path)
    os.ftruncate(fd, max(nbytes, 1))
    return fd


def _map_fd(fd: int, nbytes: int) -> tuple[mmap.mmap, torch.Tensor]:
    mm = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return mm, torch.frombuffer(mm, dtype=torch.uint8, count=max(nbytes, 1))[:nbytes]


def view(raw: torch.Tensor, ref: TensorRef) -> torch.Tensor:
    dtype = dtype_from_name(ref.dtype)
    return raw.view(dtype).as_strided(ref.shape, ref.stride, ref.offset)


def _contiguous(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    """(shape, contiguous strides, element count, element size) of a tensor of `shape` and `dtype`."""
    numel = math.prod(int(s) for s in shape)
    stride = torch.empty(0, dtype=dtype).new_empty(tuple(shape), device="meta").stride() if shape else ()
    return tuple(int(s) for s in shape), tuple(stride), numel, torch.empty((), dtype=dtype).element_size()


@dataclass
class _Buffer:
    info: BufferInfo
    raw: torch.Tensor
    fd: int = -1
    ptr: int = 0
    mm: mmap.mmap | None = None


class Arena:
    """The judge's shared buffers for one runner: `tensor()` allocates, `pending()` lists those the runner was not told
    of, `close()` frees its own; `adopt()` announces another arena's (a kept pool's), never freed here."""

    def __init__(self, device: str, transport: str = "auto", first_id: int = 0):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.index = (torch.device(device).index or 0) if self.cuda else 0
        self.transport = ("cuda-ipc" if self.cuda else "fd") if transport == "auto" else transport
        self._buffers: dict[int, _Buffer] = {}
        self._announced: set[int] = set()
        self._borrowed: set[int] = set()
        self._next = first_id
        if self.transport == "cuda-ipc":
            driver().ensure_context(self.index)

    @property
    def nbytes(self) -> int:
        return sum(b.info.nbytes for b in self._buffers.values())

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, TensorRef]:
        """A new contiguous tensor in a buffer of its own, and its reference."""
        dims, stride, numel, size = _contiguous(shape, dtype)
        buffer = self._new_buffer(numel * size)
        ref = TensorRef(buffer.info.buffer, dtype_name(dtype), dims, stride, 0)
        return view(buffer.raw, ref), ref

    def slab(self, specs: list[tuple[tuple[int, ...], torch.dtype]]) -> list[tuple[torch.Tensor, TensorRef]]:
        """Many contiguous tensors in one buffer (64-byte aligned): one descriptor or IPC handle for a whole pool."""
        layout, cursor = [], 0
        for shape, dtype in specs:
            dims, stride, numel, size = _contiguous(shape, dtype)
            layout.append((dtype, dims, stride, cursor // size))
            cursor += -(-numel * size // 64) * 64
        buffer = self._new_buffer(max(cursor, 64))
        refs = [TensorRef(buffer.info.buffer, dtype_name(dtype), dims, stride, offset)
                for dtype, dims, stride, offset in layout]
        return [(view(buffer.raw, ref), ref) for ref in refs]

    def _new_buffer(self, nbytes: int) -> _Buffer:
        self._next += 1
        bid = self._next
        if self.transport == "cuda-ipc":
            drv = driver()
            ptr = drv.alloc(nbytes)
            info = BufferInfo(bid, nbytes, "cuda-ipc", drv.export(ptr), self.index)
            buf = _Buffer(info, _cuda_bytes(ptr, max(nbytes, 1), self.index)[:nbytes], ptr=ptr)
        else:
            fd = _memfd(nbytes)
            mm, raw = _map_fd(fd, nbytes)
            buf = _Buffer(BufferInfo(bid, nbytes, "fd"), raw, fd=fd, mm=mm)
        self._buffers[bid] = buf
        return buf

    def owned(self) -> list[_Buffer]:
        return [b for bid, b in sorted(self._buffers.items()) if bid not in self._borrowed]

    def wipe(self) -> None:
        for b in self.owned():
            b.raw.zero_()

    def adopt(self, buffers: list[_Buffer]) -> None:
        """Announce another arena's `buffers` to this arena's runner."""
        for b in buffers:
            if b.info.buffer in self._buffers:
                raise ValueError(f"shared buffer id {b.info.buffer} is already in use in this arena")
            if b.info.kind != ("cuda-ipc" if self.transport == "cuda-ipc" else "fd"):
                raise ValueError(f"a {b.info.kind} buffer cannot go to a runner reached by {self.transport}")
            self._buffers[b.info.buffer] = b
            self._borrowed.add(b.info.buffer)

    def pending(self) -> tuple[tuple[BufferInfo, ...], list[int]]:
        new = [b for bid, b in sorted(self._buffers.items()) if bid not in self._announced]
        self._announced.update(b.info.buffer for b in new)
        return tuple(b.info for b in new), [b.fd for b in new if b.info.kind == "fd"]

    def close(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.index)
        for b in self.owned():
            b.raw = None  # type: ignore[assignment]
            if b.ptr:
                driver().free(b.ptr)
            if b.mm is not None:
                with contextlib.suppress(BufferError):  # a view is still alive: the mapping goes with the process
                    b.mm.close()
            if b.fd >= 0:
                os.close(b.fd)
        self._buffers.clear()
        self._borrowed.clear()


#: First buffer id of a kept timing pool's own arena: far above any a runner's arena reaches.
POOL_BUFFER_IDS = 1 << 24


class Mapping:
    """The runner's view of the judge's buffers."""

    def __init__(self, device: str):
        self.device = device
        self._raw: dict[int, torch.Tensor] = {}
        self._keep: list[Any] = []
        self._opened: list[int] = []

    def add(self, infos: tuple[BufferInfo, ...], fds: list[int]) -> None:
        fds = list(fds)
        for info in infos:
            if info.kind == "fd":
                if not fds:
                    raise ValueError(f"buffer {info.buffer} announced without its descriptor")
                fd = fds.pop(0)
                mm, raw = _map_fd(fd, info.nbytes)
                os.close(fd)
                self._keep.append(mm)
            elif info.kind == "cuda-ipc":
                drv = driver()
                drv.ensure_context(info.device)
                ptr = drv.open(info.handle)
                self._opened.append(ptr)
                raw = _cuda_bytes(ptr, max(info.nbytes, 1), info.device)[: info.nbytes]
            else:
                raise ValueError(f"unknown buffer kind {info.kind!r}")
            self._raw[info.buffer] = raw

    def tensor(self, ref: TensorRef) -> torch.Tensor:
        raw = self._raw.get(ref.buffer)
        if raw is None:
            raise ValueError(f"unknown shared buffer {ref.buffer}")
        return view(raw, ref)
