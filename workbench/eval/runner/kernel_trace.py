"""Which GPU kernels one call ran and for how long, from CUPTI's activity API called directly (the torch profiler's
first session costs seconds). Only a kernel record's leading fields are read (kind, start, end, name); anything
unexpected raises `TraceUnavailable` and the runner falls back to the torch profiler."""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from typing import Any

#: CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.
KIND_CONCURRENT_KERNEL = 10
_OFFSET_START, _OFFSET_END, _OFFSET_NAME = 16, 24, 104
_BUFFER_BYTES = 8 << 20

_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                            ctypes.POINTER(ctypes.c_size_t))
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_size_t)


class TraceUnavailable(RuntimeError):
    """CUPTI could not be used here (no library, an error code, an unexpected record)."""


def _candidates() -> list[str]:
    """Library files to try, a private copy first (Kineto's callbacks on torch's libcupti would take the records)."""
    import torch

    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = sorted(glob.glob("/usr/local/cuda*/targets/*/lib/libcupti.so.*[0-9]"))
    found += sorted(glob.glob("/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so.*[0-9]"))
    for pattern in ("nvidia/cu*/lib/libcupti.so*", "nvidia/cuda_cupti/lib/libcupti.so*"):
        found += sorted(glob.glob(os.path.join(site, pattern)))
    return found + ["libcupti.so.13", "libcupti.so.12", "libcupti.so"]


def _load() -> ctypes.CDLL:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.cuptiActivityEnable  # noqa: B018 - the symbol must exist
            return lib
        except (OSError, AttributeError):
            continue
    raise TraceUnavailable("no libcupti could be loaded")


def demangle(name: str) -> str:
    """A C++ kernel name as the profiler prints it ('void ns::k<float>(float*, int)'); others unchanged."""
    if not name.startswith("_Z"):
        return name
    try:
        lib = ctypes.CDLL("libstdc++.so.6")
        fn = lib.__cxa_demangle
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        status = ctypes.c_int(0)
        ptr = fn(name.encode(), None, None, ctypes.byref(status))
        if status.value != 0 or not ptr:
            return name
        text = ctypes.string_at(ptr).decode(errors="replace")
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))
        return text
    except (OSError, AttributeError):
        return name


def profiler_kernels(events: Any) -> dict[str, float]:
    """{kernel: us} from the torch profiler's events of one call, copies and memsets left out."""
    kernels: dict[str, float] = {}
    for evt in events:
        if "cuda" not in str(getattr(evt, "device_type", "")).lower():
            continue
        us = float(getattr(evt, "device_time", 0.0) or getattr(evt, "cuda_time", 0.0) or 0.0)
        if us > 0 and not evt.name.startswith(("Memcpy", "Memset", "cudaMem")):
            kernels[evt.name] = kernels.get(evt.name, 0.0) + us
    return kernels


class KernelTracer:
    """One per runner: `trace(call)` returns {kernel name: microseconds summed over its launches}."""

    def __init__(self) -> None:
        self.lib = _load()
        self.buffers: list[Any] = []
        self.records: list[tuple[str, float]] = []
        self.errors: list[str] = []
        self._request = _REQUEST(self._on_request)
        self._complete = _COMPLETE(self._on_complete)
        status = self.lib.cuptiActivityRegisterCallbacks(self._request, self._complete)
        if status != 0:
            raise TraceUnavailable(f"cuptiActivityRegisterCallbacks returned {status}")

    def _on_request(self, buf: Any, size: Any, max_records: Any) -> None:
        raw = ctypes.create_string_buffer(_BUFFER_BYTES + 8)
        self.buffers.append(raw)
        buf[0] = (ctypes.addressof(raw) + 7) & ~7
        size[0] = _BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, context: Any, stream: int, buf: Any, size: int, valid: int) -> None:
        record = ctypes.c_void_p()
        try:
            while self.lib.cuptiActivityGetNextRecord(ctypes.c_void_p(buf), ctypes.c_size_t(valid),
                                                      ctypes.byref(record)) == 0:
                address = record.value
                if ctypes.c_uint32.from_address(address).value != KIND_CONCURRENT_KERNEL:
                    continue
                start = ctypes.c_uint64.from_address(address + _OFFSET_START).value
                end = ctypes.c_uint64.from_address(address + _OFFSET_END).value
                name = ctypes.c_char_p.from_address(address + _OFFSET_NAME).value
                if name is None or end < start:
                    self.errors.append("a kernel record without a name or with end before start")
                    continue
                self.records.append((name.decode(errors="replace"), (end - start) / 1e3))
        except Exception as exc:  # noqa: BLE001 - a callback must not raise into CUPTI
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def trace(self, call: Callable[[], Any], synchronize: Callable[[], None]) -> dict[str, float]:
        self.records.clear()
        self.errors.clear()
        synchronize()
        status = self.lib.cuptiActivityEnable(KIND_CONCURRENT_KERNEL)
        if status != 0:
            raise TraceUnavailable(f"cuptiActivityEnable returned {status}")
        try:
            call()
            synchronize()
        finally:
            self.lib.cuptiActivityFlushAll(1)
            self.lib.cuptiActivityDisable(KIND_CONCURRENT_KERNEL)
            self.buffers.clear()
        if self.errors:
            raise TraceUnavailable("; ".join(self.errors[:3]))
        kernels: dict[str, float] = {}
        for name, us in self.records:
            name = demangle(name)
            kernels[name] = kernels.get(name, 0.0) + us
        return kernels
