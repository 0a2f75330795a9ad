"""How much work a task does at a size: the task's own formulas when it gives them, else counted on the reference.

Counting runs the reference under FakeTensorMode: tensors carry shapes and dtypes but no data, so no arithmetic
happens and a GPU-size problem (an 8192 x 8192 softmax, a 4096^3 matmul) is counted in milliseconds on a
laptop without allocating its gigabytes. FLOPs come from torch's FlopCounterMode (matmul, conv, attention;
elementwise and reduction ops count 0, which is why built-in tasks carry formulas). Bytes are the minimum any
implementation must move: every distinct input, parameter and buffer read once, every output written once (a floor
assuming more traffic would call honest kernels "faster than physics"). The judge counts on real tensors
(`count_work`), the caller on fake ones (`count`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import TaskError
from workbench.lazy_dynamo import spare_dynamo_import
from workbench.tasks.task import Task

#: Real (non-fake) counting is allowed as a fallback only below this many input bytes.
REAL_FALLBACK_BYTES = 256 << 20


def tensor_nbytes(t: Any) -> int:
    """Bytes of memory a view spans: a broadcast (stride-0) view of one row is one row, read once."""
    n = t.numel()
    if n == 0:
        return 0
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))
    return min(n, span) * t.element_size()


def _identity(t: Any) -> tuple:
    # Two tensors viewing the same memory are read once; fake/meta tensors have no address: the object stands in.
    from torch._subclasses.fake_tensor import FakeTensor

    ptr = None
    if not isinstance(t, FakeTensor) and t.device.type != "meta":
        try:
            ptr = t.data_ptr()
        except Exception:  # noqa: BLE001 - sparse and other layouts without one address
            ptr = None
    if not ptr:
        return ("obj", id(t))
    return ("mem", ptr, tuple(t.shape), tuple(t.stride()), t.dtype)


def tensors_in(obj: Any) -> list[Any]:
    """Every tensor in a nested structure (list, tuple, dict, dataclass-free), in order, without repeats."""
    import torch
    from torch.utils._pytree import tree_leaves

    seen: set[tuple] = set()
    out = []
    for leaf in tree_leaves(obj):
        if isinstance(leaf, torch.Tensor):
            key = _identity(leaf)
            if key not in seen:
                seen.add(key)
                out.append(leaf)
    return out


def module_state(model: Any) -> list[Any]:
    """Parameters and buffers of a reference module (weights are read too); [] for a plain callable."""
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    buffers = list(model.buffers()) if hasattr(model, "buffers") else []
    return params + buffers


def minimal_bytes(reads: Iterable[Any], writes: Iterable[Any]) -> float:
    """Distinct tensors in `reads` read once plus distinct tensors in `writes` written once."""
    return float(sum(tensor_nbytes(t) for t in tensors_in(list(reads))) +
                 sum(tensor_nbytes(t) for t in tensors_in(list(writes))))


def _sdpa_flops(query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """FLOPs of attention without a mask shortcut: scores = q @ k^T, then scores @ v (2 per multiply-add)."""
    b, h, s_q, d = query.shape
    s_k, d_v = key.shape[-2], value.shape[-1]
    return 2 * b * h * s_q * s_k * d + 2 * b * h * s_q * s_k * d_v


_sdpa_flops._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: pass tensors, not shapes


def flop_counter():
    """torch's FlopCounterMode, plus the attention kernels it counts as 0 (scaled_dot_product_attention's CPU flash
    path, taken on the CPU and under FakeTensorMode)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    spare_dynamo_import()
    extra = {}
    for name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_fused_attention_overrideable"):
        op = getattr(torch.ops.aten, name, None)
        if op is not None:
            extra[op] = _sdpa_flops
    return FlopCounterMode(display=False, custom_mapping=extra)


def count_work(model: Any, inputs: list[Any]) -> dict[str, float | None]:
    """{"flops": float | None, "bytes": float} of one forward of `model` on `inputs`; flops is None when the counter
    sees no matmul/conv/attention (it ignores elementwise and reduction ops: a task's `flops` formula covers them)."""
    import torch

    flops: float | None = None
    out = None
    try:
        with flop_counter() as counter, torch.no_grad():
            out = model(*inputs)
        flops = float(counter.get_total_flops()) or None
    except Exception:  # noqa: BLE001 - counting is best effort; the task's own formula wins anyway
        try:
            with torch.no_grad():
                out = model(*inputs)
        except Exception:  # noqa: BLE001 - the reference failing is reported by the worker, not here
            out = None
    nbytes = minimal_bytes([*inputs, *module_state(model)], [out] if out is not None else [])
    return {"flops": flops, "bytes": nbytes}


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
