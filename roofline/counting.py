"""How much work a task does at a size: the task's own formulas when given, else counted on the reference.

FLOPs come from torch's FlopCounterMode run under FakeTensorMode (shapes only, no arithmetic, so GPU-size
problems count in milliseconds on a laptop); minimal bytes = every input read once + every output written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.task import Task


@dataclass(frozen=True)
class Work:
    flops: float | None
    bytes: float
    source: str  # "task" (the task's formulas) or "counted"

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.flops and self.bytes else None


def _nbytes(xs: list[Any]) -> float:
    import torch

    return float(sum(t.numel() * t.element_size() for t in xs if isinstance(t, torch.Tensor)))


def count_reference(task: Task, size: dict[str, Any]) -> Work:
    """FLOPs and minimal bytes of one reference forward at `size`, without computing it."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    ref = task.load()
    init = ref.init_inputs(size, 0)
    with FakeTensorMode(allow_non_fake_inputs=True):
        inputs = ref.make_inputs(size, 0, "cpu", "default")
        model = ref.module.Model(*init)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            out = model(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        nbytes = _nbytes(inputs) + _nbytes(outs)
    flops = float(counter.get_total_flops()) or None
    return Work(flops, nbytes, "counted")


def count(task: Task, size: dict[str, Any] | str | None = None, device: str = "cpu") -> Work:
    """The task's own flops()/bytes() when it has them, else counted on the reference."""
    size = task.size(size, device) if not isinstance(size, dict) else size
    if task.flops is not None and task.bytes is not None:
        return Work(float(task.flops(size)), float(task.bytes(size)), "task")
    counted = count_reference(task, size)
    flops = float(task.flops(size)) if task.flops is not None else counted.flops
    nbytes = float(task.bytes(size)) if task.bytes is not None else counted.bytes
    return Work(flops, nbytes, "task" if task.flops is not None else "counted")
