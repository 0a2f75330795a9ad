"""How much work a task does at a size: the task's own formulas when it gives them, else counted on the reference.

Counting runs the reference under FakeTensorMode: tensors carry shapes and dtypes but no data, so no arithmetic
happens and a GPU-size problem (an 8192 x 8192 softmax, a 4096^3 matmul) is counted in milliseconds on a
laptop without allocating its gigabytes. FLOPs come from torch's FlopCounterMode (matmul, conv, attention;
elementwise and reduction ops count 0, which is why built-in tasks carry formulas). Bytes are the minimum any
implementation must move: every distinct input, parameter and buffer read once, every output written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.errors import TaskError
from workbench.eval.judge.reference.counting import flop_counter, minimal_bytes, module_state
from workbench.tasks.task import Task

#: Real (non-fake) counting is allowed as a fallback only below this many input bytes.
REAL_FALLBACK_BYTES = 256 << 20


@dataclass(frozen=True)
class Work:
    """FLOPs and minimal bytes of one forward. source: "task" (the task's formulas), "counted" (measured on
    the reference) or "task+counted" (one of each)."""

    flops: float | None
    bytes: float
    source: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity in FLOP/byte (None without FLOPs)."""
        return self.flops / self.bytes if self.flops and self.bytes else None


def _forward(ref, size: dict[str, Any], init: list) -> tuple[float | None, float]:
    import torch

    inputs = ref.make_inputs(size, 0, "cpu", "default")
    model = ref.module.Model(*init)
    with flop_counter() as counter, torch.no_grad():
        out = model(*inputs)
    nbytes = minimal_bytes([*inputs, *module_state(model)], [out])
    return float(counter.get_total_flops()) or None, nbytes


def count_reference(task: Task, size: dict[str, Any] | str | None = None) -> Work:
    """FLOPs and minimal bytes of one reference forward at `size`, counted without computing it.

    Falls back to running the reference for real (on the CPU) when an op has no fake implementation, but only
    for small problems; a large one raises TaskError asking for `flops`/`bytes` formulas on the task.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    size = task.size(size, "cpu") if not isinstance(size, dict) else size
    ref = task.load()
    init = ref.init_inputs(size, 0)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            flops, nbytes = _forward(ref, size, init)
        mode = "fake"
    except Exception as fake_exc:  # noqa: BLE001 - data-dependent ops, custom ops without fake kernels
        with FakeTensorMode(allow_non_fake_inputs=True):
            probe = ref.make_inputs(size, 0, "cpu", "default")
        if minimal_bytes(probe, []) > REAL_FALLBACK_BYTES:
            raise TaskError(
                f"task {task.name!r}: cannot count work at {size} without running it ({type(fake_exc).__name__}: "
                f"{fake_exc}); give the task `flops` and `bytes` formulas", task.name) from fake_exc
        flops, nbytes = _forward(ref, size, init)
        mode = "real"
    return Work(flops, nbytes, "counted", {"mode": mode, "size": dict(size)})


def count(task: Task, size: dict[str, Any] | str | None = None, device: str = "cpu") -> Work:
    """Work of `task` at `size` (a dict, a preset name, or None for `device`'s preset): the task's own
    `flops`/`bytes` formulas where given, the reference counted for the rest."""
    size = task.size(size, device) if not isinstance(size, dict) else size
    flops = float(task.flops(size)) if task.flops is not None else None
    nbytes = float(task.bytes(size)) if task.bytes is not None else None
    details: dict[str, Any] = {}
    if flops is None or nbytes is None:
        counted = count_reference(task, size)
        details = {"counted_flops": counted.flops, "counted_bytes": counted.bytes, **counted.details}
    sources = {"task" if task.flops is not None else "counted", "task" if task.bytes is not None else "counted"}
    source = sources.pop() if len(sources) == 1 else "task+counted"
    if flops is None:
        flops = details.get("counted_flops")
    if nbytes is None:
        nbytes = details["counted_bytes"]
    return Work(flops, nbytes, source, details)
