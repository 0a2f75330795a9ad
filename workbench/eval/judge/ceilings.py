"""Measured roofline ceilings for a reply: the CPU and a GPU missing from the datasheet table need measured ceilings
(seconds and gigabytes the first time, then cached on disk), so the judge measures or reads them and sends them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

#: torch's thread count before the judge lowered it for timing: CPU ceilings are measured with the default.
DEFAULT_THREADS = torch.get_num_threads()


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
    """(ceilings, "") where a verdict or a SOL needs them, (None, why) when measuring failed, (None, "") when none
    is needed; from the disk cache, else measured inside `measuring()` (an exclusive hold of the device)."""
    try:
        if clock is None or clock == "interpreter":
            return None, ""
        gpu = device.startswith("cuda") or clock == "cuda-events"
        if gpu:
            from roofline.specs import match_device_name

            if match_device_name(device_name) is not None:  # the datasheet's ceilings
                return None, ""
        from roofline.ceilings import get_ceilings, load_cached

        target = device if gpu else "cpu"
        with _default_threads():
            cached = load_cached(target)
            if cached is not None:
                return cached.to_dict(), ""
            with measuring():
                return get_ceilings(target).to_dict(), ""
    except Exception as exc:  # noqa: BLE001 - no roof is a note on the result, never a failed evaluation
        return None, f"could not measure the roofline ceilings: {type(exc).__name__}: {exc}"[:300]
