"""Measured roofline ceilings for a reply, from the judge (the engine's hook into `roofline.ceilings`).

A verdict's SOL fraction needs a roof: a GPU in the datasheet table has one; the CPU and an unknown GPU need
measured ceilings (copy bandwidth, matmul rate), which take seconds and gigabytes the first time and are then
cached on disk. That work belongs to trusted code outside the user's notebook, so the judge measures (or reads)
them and sends them in its reply; the caller only turns them into a roof.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

#: torch's intra-op thread count before the judge lowered it for timing (`cpu_timing_threads`): CPU ceilings are
#: measured, and keyed in the cache, with the machine's default, as `kwb roofline` measures them.
DEFAULT_THREADS = torch.get_num_threads()


def needs_measured_roof(device: str, device_name: str, clock: str | None) -> bool:
    """True when a result timed on `clock` is judged against measured ceilings (not a datasheet, not none)."""
    if clock is None or clock == "interpreter":
        return False
    gpu = device.startswith("cuda") or clock == "cuda-events"
    if not gpu:
        return True
    from roofline.specs import match_device_name

    return match_device_name(device_name) is None


@contextlib.contextmanager
def _default_threads() -> Iterator[None]:
    timing_threads = torch.get_num_threads()
    torch.set_num_threads(DEFAULT_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(timing_threads)


def measured_ceilings(device: str, device_name: str, clock: str | None,
                      measuring: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
                      ) -> tuple[dict[str, Any] | None, str]:
    """(the device's ceilings as a dict, "") when a verdict or a SOL needs them; (None, why not) when measuring
    failed; (None, "") when no measured roof is needed. From the disk cache, else measured inside `measuring()` (the
    evaluation makes it an exclusive hold of the device: a measurement owns the device, a cache read needs none)."""
    try:
        if not needs_measured_roof(device, device_name, clock):
            return None, ""
        from roofline.ceilings import get_ceilings, load_cached

        gpu = device.startswith("cuda") or clock == "cuda-events"
        target = device if gpu else "cpu"
        with _default_threads():
            cached = load_cached(target)
            if cached is not None:
                return cached.to_dict(), ""
            with measuring():
                return get_ceilings(target).to_dict(), ""
    except Exception as exc:  # noqa: BLE001 - no roof is a note on the result, never a failed evaluation
        return None, f"could not measure the roofline ceilings: {type(exc).__name__}: {exc}"[:300]
