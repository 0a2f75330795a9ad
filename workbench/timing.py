"""Timing inside the worker: interleaved, rotated inputs, L2 flushed, median with a 95% CI (CHEATS.md rows 7, 9, 10).

Every function this module times with is bound to a private name at import, before any candidate module is
imported, so a candidate that later patches `time.perf_counter` or `torch.cuda.Event.elapsed_time` cannot change
what is measured.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable
from typing import Any

import torch

from workbench.result import Timing

_perf_ns = _time.perf_counter_ns
_sorted = sorted
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_no_grad = torch.no_grad
_sleep = getattr(torch.cuda, "_sleep", None)

#: GPU cycles of busy-wait queued before each start event, so the host's launch cost overlaps it (~100 us).
LAUNCH_COVER_CYCLES = 200_000
#: A run counts as side-stream when the device finished this much later than the current stream.
SIDE_STREAM_SLACK_MS = 0.03


def default_reps(device: str, interpreter: bool) -> tuple[int, int]:
    """(warm-up, timed reps): >= 50 timed runs on a GPU; few on the interpreter, which is ~1000x slower."""
    if device.startswith("cuda"):
        return 10, 100
    if interpreter:
        return 1, 5
    return 3, 30


def l2_flush_bytes(device: str) -> int:
    """Twice the device's L2 so one write evicts everything a previous run left there."""
    if not device.startswith("cuda"):
        return 0
    try:
        l2 = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0))
    except Exception:  # pragma: no cover - depends on the driver
        l2 = 0
    return max(2 * l2, 256 * 1024 * 1024) if l2 == 0 else 2 * l2


def _median_ci(samples: list[float]) -> tuple[float, float, float]:
    """Median and its 95% CI from order statistics: ranks n/2 -+ 1.96 sqrt(n)/2 (normal approximation to the
    binomial), which needs no assumption about the shape of the timing distribution."""
    s = _sorted(samples)
    n = len(s)
    mid = n // 2
    median = s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])
    half = 1.96 * math.sqrt(n) / 2
    j = max(1, int(math.floor(n / 2 - half)))  # 1-based ranks
    k = min(n, int(math.ceil(1 + n / 2 + half)))
    return median, s[j - 1], s[k - 1]


def _quantile(s: list[float], q: float) -> float:
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(samples_ms: list[float], clock: str, side_stream_runs: int = 0) -> Timing:
    if not samples_ms:
        raise ValueError("no timing samples")
    s = _sorted(samples_ms)
    median, lo, hi = _median_ci(s)
    return Timing(median_ms=median, min_ms=s[0], max_ms=s[-1], iqr_ms=_quantile(s, 0.75) - _quantile(s, 0.25),
                  ci95_low_ms=lo, ci95_high_ms=hi, n=len(s), clock=clock, samples_ms=list(samples_ms),
                  side_stream_runs=side_stream_runs)


def _time_cuda_call(fn: Callable[[list], Any], inputs: list) -> tuple[float, bool, Any]:
    """(ms, side-stream?, output) of one call. The start event queues behind a GPU busy-wait so the host's
    launch cost is hidden; the end is read on the current stream and again after a device synchronize: if the
    device finished notably later, other streams were still working and the run is timed to that point."""
    start, end, done = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
    if _sleep is not None:
        _sleep(LAUNCH_COVER_CYCLES)
    _record(start)
    out = fn(inputs)
    _record(end)
    _synchronize()
    _record(done)
    _synchronize()
    stream_ms, device_ms = _elapsed(start, end), _elapsed(start, done)
    if device_ms - stream_ms > SIDE_STREAM_SLACK_MS + 0.05 * stream_ms:
        return device_ms, True, out
    return stream_ms, False, out


class _Flusher:
    def __init__(self, device: str, enabled: bool):
        self.buf = None
        if enabled and device.startswith("cuda"):
            self.buf = torch.empty(l2_flush_bytes(device) // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()


def measure(fns: dict[str, Callable[[list], Any]], input_pool: list[list], *, device: str, warmup: int, reps: int,
            clock: str, flush_l2: bool = True,
            refresh: Callable[[int, list], None] | None = None) -> tuple[dict[str, Timing], dict[str, tuple[list, Any]]]:
    """Time several callables interleaved; call k of each sees input set k mod len(pool).

    On a GPU a run whose device work outlasts the current stream is timed to the device synchronize, so work a
    callable put on another stream is inside its time. `refresh(k, inputs)` may rewrite input set k in place
    between reps (outside the timed window) so results cached by address or content go stale. Returns Timing
    per name, (inputs, output) of each one's last timed call, and under "name#k" the last call on input set k.
    """
    if not input_pool:
        raise ValueError("measure needs at least one input set")
    names = list(fns)
    cuda = device.startswith("cuda")
    flush = _Flusher(device, flush_l2)
    samples: dict[str, list[float]] = {n: [] for n in names}
    side_runs: dict[str, int] = {n: 0 for n in names}
    last: dict[str, tuple[list, Any]] = {}
    with _no_grad():
        for i in range(warmup):
            for name in names:
                fns[name](input_pool[i % len(input_pool)])
        if cuda:
            _synchronize()
        for rep in range(reps):
            order = names[rep % len(names):] + names[: rep % len(names)]
            for name in order:
                inputs = input_pool[(rep + names.index(name)) % len(input_pool)]
                flush()
                if cuda:
                    ms, side, out = _time_cuda_call(fns[name], inputs)
                    samples[name].append(ms)
                    side_runs[name] += side
                else:
                    t0 = _perf_ns()
                    out = fns[name](inputs)
                    samples[name].append((_perf_ns() - t0) / 1e6)
                k = (rep + names.index(name)) % len(input_pool)
                last[f"{name}#{k}"] = (inputs, out)
                if rep == reps - 1:
                    last[name] = (inputs, out)
                del out
            if refresh is not None and rep < reps - len(input_pool):
                refresh(rep % len(input_pool), input_pool[rep % len(input_pool)])
    return {n: summarize(samples[n], clock, side_runs[n]) for n in names}, last
