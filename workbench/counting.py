"""Work counting run inside the worker on the reference: FLOPs via torch's FlopCounterMode, minimal bytes."""

from __future__ import annotations

from typing import Any


def count_work(model: Any, inputs: list[Any]) -> dict[str, float | None]:
    """{"flops": float | None, "bytes": float}: FLOPs of one forward, bytes = inputs read + outputs written once."""
    import torch

    flops: float | None = None
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter, torch.no_grad():
            out = model(*inputs)
        flops = float(counter.get_total_flops()) or None
    except Exception:  # counting is best effort; the task's own formula wins anyway
        with torch.no_grad():
            out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    nbytes = sum(t.numel() * t.element_size() for t in [*inputs, *outs] if isinstance(t, torch.Tensor))
    return {"flops": flops, "bytes": float(nbytes)}
