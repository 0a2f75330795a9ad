"""The timing loop, used on both sides of the trust boundary (the runner times the candidate, the judge the reference):
one call per input set of the batch, L2 flushed before each, side-stream work caught (docs/anti-cheating.md, cheats 7, 9, 10).

In the runner this loop's clock only refines: the judge brackets the whole batch with its own clock and decides
(`workbench.eval.judge.timing.clock_check`). Its functions are still bound to private names at import, before any
candidate module is imported, so the plain patches of `time.perf_counter`, `torch.cuda.Event.elapsed_time` or
`torch.cuda.synchronize` do not even reach it.

No busy-wait is queued before a call any more: its length was a count of GPU cycles, so it lasted 6x longer at an
idle clock than at a boosted one and moved the harness's own cost between the judge's calibration and the timed
batches. The L2 flush queued before each call (a memory-bound write of twice the L2, ~35 us on an H100) covers a
short host launch just as well.
"""

from __future__ import annotations

import gc as _gc
import time as _time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from workbench.seeding import seed_all

_perf_ns = _time.perf_counter_ns
_sorted, _len, _range = sorted, len, range
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_properties = torch.cuda.get_device_properties
_empty = torch.empty
_zero = torch.Tensor.zero_
_no_grad = torch.no_grad
_manual_seed = seed_all
_gc_disable, _gc_enable, _gc_isenabled = _gc.disable, _gc.enable, _gc.isenabled
#: A callable has side-stream work when, over all its runs, the device finished this much later (median) than
#: the current stream, plus 10% of the stream time. Single runs are not judged: host wake-up after a
#: synchronize alone can add tens of microseconds to one run.
SIDE_STREAM_SLACK_MS = 0.05
#: L2 flush size where the driver does not report the L2 size.
FALLBACK_FLUSH_BYTES = 256 * 1024 * 1024


#: Intra-op threads of the judge and a runner on the CPU (see `cpu_timing_threads`).
CPU_TIMING_THREADS = 1


def cpu_timing_threads() -> None:
    """On the CPU the judge and a runner each use one intra-op thread.

    They take turns on the same cores, and a frozen runner is resumed (SIGCONT) with its OpenMP threads queued on
    one core: for the next ~20 ms every small op waits for its worker to be scheduled (a 8x64 softmax: 3 us ->
    600 us), so the side timed second looked 200x slower for identical code. One thread on each side is the same
    machine for the reference and the candidate, which is what a speedup compares."""
    torch.set_num_threads(CPU_TIMING_THREADS)


def seed_rng(seed: int | None) -> None:
    """Seed the global RNG (every device) when a seed is given. The judge and the runner seed before each call of
    the same inputs with the same value, so a forward that draws random numbers computes one function."""
    if seed is not None:
        _manual_seed(seed)


def default_reps(device: str, interpreter: bool) -> tuple[int, int]:
    """(warm-up, timed reps): >= 50 timed runs on a GPU; few on the interpreter, which is ~1000x slower."""
    if device.startswith("cuda"):
        return 10, 100
    if interpreter:
        return 1, 5
    return 5, 30


def l2_flush_bytes(device: str) -> int:
    """Bytes written between timed runs: twice the device's L2, so one write evicts everything a previous run
    left there (256 MiB where the L2 size is unknown); 0 on the CPU."""
    if not device.startswith("cuda"):
        return 0
    try:
        l2 = int(getattr(_properties(torch.device(device)), "L2_cache_size", 0) or 0)
    except Exception:  # pragma: no cover - depends on the driver
        l2 = 0
    return 2 * l2 if l2 > 0 else FALLBACK_FLUSH_BYTES


def _time_cuda_call(fn: Callable[[list], Any], inputs: list) -> tuple[float, float, Any]:
    """(current-stream ms, device ms, output) of one call: the end is read on the current stream and again after a
    device synchronize (work left on another stream)."""
    start, end, done = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
    _record(start)
    out = fn(inputs)
    _record(end)
    _synchronize()
    _record(done)
    _synchronize()
    return _elapsed(start, end), _elapsed(start, done), out


def _pick_samples(stream: list[float], device: list[float]) -> tuple[list[float], int]:
    """Stream times, unless the device was busy well past the stream in the median run: then the work ran on
    another stream, and the device times (its true cost) are reported."""
    if not device:
        return stream, 0
    excess = _sorted(d - s for s, d in zip(stream, device, strict=False))[len(device) // 2]
    med = _sorted(stream)[len(stream) // 2]
    if excess > SIDE_STREAM_SLACK_MS + 0.1 * med:
        return device, sum(1 for s, d in zip(stream, device, strict=False) if d - s > SIDE_STREAM_SLACK_MS + 0.1 * s)
    return stream, 0


class _Flusher:
    """Writes `l2_flush_bytes` before each timed GPU call; queued before the start event, so the write is outside
    the timed window. Allocates and writes through the bound functions: a candidate that patches
    `torch.Tensor.zero_` cannot turn the flush off."""

    def __init__(self, device: str, enabled: bool):
        self.buf = None
        if enabled and device.startswith("cuda"):
            self.buf = _empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buf is not None:
            _zero(self.buf)


def time_batch(fn: Callable[[list], Any], input_sets: list[list], order: list[int], *, device: str, warmup: int = 0,
               flush_l2: bool = True, after_rep: Callable[[int, Any], None] | None = None,
               seeds: Sequence[int] = ()) -> tuple[list[float], list[float]]:
    """Time `fn` once per entry of `order` (an index into `input_sets`), after `warmup` untimed calls.

    Used on both sides of the trust boundary: the runner times the candidate, the judge the reference, with this
    same loop. On a GPU each rep flushes the L2 (queued before the start event, outside the window); the end is read
    on the current stream and again after a device-wide synchronize (side-stream work). `after_rep(k, output)` runs
    after rep k, outside the window (the runner copies the output into the judge's slot there; the judge's clock
    still sees it). `seeds[k]` seeds the global RNG before rep k, also outside the window, so a forward that draws
    random numbers gives the judge's recomputation of that rep the same draws.
    Returns (stream ms, device ms) per rep; on the CPU both are the wall clock.

    The garbage collector is off for the batch (as `timeit` does): a collection is triggered by allocation counts,
    and a process that holds more objects (a candidate's runner after its correctness calls, beside the
    reference's fresh one) pays more for each, inside whichever call it lands in.
    """
    if not input_sets or not order:
        raise ValueError("time_batch needs input sets and an order")
    collecting = _gc_isenabled()
    _gc_disable()
    try:
        return _time_batch(fn, input_sets, order, device, warmup, flush_l2, after_rep, seeds)
    finally:
        if collecting:
            _gc_enable()


def _time_batch(fn: Callable[[list], Any], input_sets: list[list], order: list[int], device: str, warmup: int,
                flush_l2: bool, after_rep: Callable[[int, Any], None] | None,
                seeds: Sequence[int]) -> tuple[list[float], list[float]]:
    cuda = device.startswith("cuda")
    flush = _Flusher(device, flush_l2)
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
            flush()
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
