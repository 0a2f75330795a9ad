"""The timing loop of both sides: one call per input set, L2 flushed before each, side-stream work caught
(docs/anti-cheating.md, cheats 7, 9, 10). Its functions are bound at import, before any candidate; in the runner its
clock only refines the judge's (`judge/timing/clock_check.py`)."""

from __future__ import annotations

import gc as _gc
import time as _time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from workbench.seeding import seed_all

_perf_ns, _sorted, _len, _range = _time.perf_counter_ns, sorted, len, range
_Event, _elapsed, _record = torch.cuda.Event, torch.cuda.Event.elapsed_time, torch.cuda.Event.record
_synchronize, _properties = torch.cuda.synchronize, torch.cuda.get_device_properties
_empty, _zero, _no_grad, _manual_seed = torch.empty, torch.Tensor.zero_, torch.no_grad, seed_all
_gc_disable, _gc_enable, _gc_isenabled = _gc.disable, _gc.enable, _gc.isenabled
#: Side-stream work: in the median run the device ends this much (plus 10% of the stream time) after the stream.
SIDE_STREAM_SLACK_MS = 0.05
#: L2 flush size where the driver does not report the L2 size.
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024
CPU_TIMING_THREADS = 1


def cpu_timing_threads() -> None:
    """On the CPU the judge and a runner each use one intra-op thread (benchmarks/README.md)."""
    torch.set_num_threads(CPU_TIMING_THREADS)


def seed_rng(seed: int | None) -> None:
    """Seed the global RNG (every device) when a seed is given."""
    if seed is not None:
        _manual_seed(seed)


def l2_flush_bytes(device: str) -> int:
    """Bytes written between timed runs: twice the device's L2; 0 on the CPU."""
    if not device.startswith("cuda"):
        return 0
    try:
        l2 = int(getattr(_properties(torch.device(device)), "L2_cache_size", 0) or 0)
    except Exception:  # pragma: no cover - depends on the driver
        l2 = 0
    return 2 * l2 if l2 > 0 else FALLBACK_FLUSH_BYTES


def _time_cuda_call(fn: Callable[[list], Any], inputs: list) -> tuple[float, float, Any]:
    """(current-stream ms, device ms after a device synchronize, output) of one call."""
    start, end, done = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
    _record(start)
    out = fn(inputs)
    _record(end)
    _synchronize()
    _record(done)
    _synchronize()
    return _elapsed(start, end), _elapsed(start, done), out


def _pick_samples(stream: list[float], device: list[float]) -> tuple[list[float], int]:
    """Stream times, unless the device was busy well past the stream in the median run (another stream's work)."""
    if not device:
        return stream, 0
    excess = _sorted(d - s for s, d in zip(stream, device, strict=False))[len(device) // 2]
    med = _sorted(stream)[len(stream) // 2]
    if excess > SIDE_STREAM_SLACK_MS + 0.1 * med:
        return device, sum(1 for s, d in zip(stream, device, strict=False) if d - s > SIDE_STREAM_SLACK_MS + 0.1 * s)
    return stream, 0


def time_batch(fn: Callable[[list], Any], input_sets: list[list], order: list[int], *, device: str, warmup: int = 0,
               flush_l2: bool = True, after_rep: Callable[[int, Any], None] | None = None,
               seeds: Sequence[int] = ()) -> tuple[list[float], list[float]]:
    """(stream ms, device ms) per entry of `order` (an index into `input_sets`), after `warmup` untimed calls;
    `seeds[k]` and `after_rep(k, output)` outside the timed window; the collector off, as in `timeit`."""
    if not input_sets or not order:
        raise ValueError("time_batch needs input sets and an order")
    collecting = _gc_isenabled()
    _gc_disable()
    try:
        cuda = device.startswith("cuda")
        # Written before each timed GPU call, outside the timed window.
        flush = _empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device) if cuda and flush_l2 else None
        stream_ms: list[float] = []
        device_ms: list[float] = []
        with _no_grad():
            for i in _range(warmup):
                fn(input_sets[order[i % _len(order)]])
            if cuda:
                _synchronize()
            for k, idx in enumerate(order):
                inputs = input_sets[idx]
                seed_rng(seeds[k] if k < _len(seeds) else None)
                if flush is not None:
                    _zero(flush)
                if cuda:
                    s, d, out = _time_cuda_call(fn, inputs)
                else:
                    t0 = _perf_ns()
                    out = fn(inputs)
                    s = d = (_perf_ns() - t0) / 1e6
                stream_ms.append(s)
                device_ms.append(d)
                if after_rep is not None:
                    after_rep(k, out)
                del out
            if cuda:
                _synchronize()
        return stream_ms, device_ms
    finally:
        if collecting:
            _gc_enable()
