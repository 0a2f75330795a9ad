"""Where a kernel would sit on a GPU's roofline, from counted work alone: a projection, never a measurement.

A task's FLOPs and minimal bytes at a size are known on any machine (the task's formulas, or counted on the
reference under FakeTensorMode), so its arithmetic intensity F / B is too. On a GPU's datasheet roofline that
intensity says, before the student owns the GPU:

    attainable  = min(peak(dtype), intensity x bandwidth)     the highest point a kernel of that work can reach
    bound       = "compute" if intensity > peak / bandwidth else "memory"
    floor       = max(F / peak, B / bandwidth)                 the least time the work can take there

Every candidate of one task at one size does the same counted work (the reference's), so a projection is one
point per task, size and dtype, listing the candidates that ran it. Interpreter and CPU times never enter:
nothing here was measured on the GPU, and every label says "projection".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from roofline.specs import DeviceSpec, get_spec

#: The GPU a projection uses when none is chosen: the most common datacenter GPU of the table.
DEFAULT_GPU = "H100 SXM"


@dataclass(frozen=True)
class Projection:
    """One task at one size and dtype, placed on `gpu`'s datasheet roofline by its counted work."""

    task: str
    size: dict[str, Any]
    dtype: str
    flops: float
    bytes: float
    gpu: str
    peak_flops: float
    bandwidth: float
    candidates: tuple[str, ...] = field(default=())

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def attainable_flops_per_s(self) -> float:
        return min(self.peak_flops, self.intensity * self.bandwidth)

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.bandwidth

    @property
    def bound(self) -> str:
        return "compute" if self.intensity > self.ridge else "memory"

    @property
    def floor_s(self) -> float:
        return max(self.flops / self.peak_flops, self.bytes / self.bandwidth)

    @property
    def size_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.size.items() if k != "dtype")

    def label(self) -> str:
        """"softmax (batch_size=4, dim=200, float32)"."""
        inside = ", ".join(p for p in (self.size_text, self.dtype) if p)
        return f"{self.task} ({inside})" if inside else self.task

    def verdict(self) -> str:
        """"memory-bound, floor 1.9 ns on H100 SXM"."""
        return f"{self.bound}-bound, floor {fmt_seconds(self.floor_s)} on {self.gpu}"


def fmt_seconds(seconds: float) -> str:
    """1.9e-9 -> "1.9 ns"; 0.0042 -> "4.2 ms"."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _num(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def _row(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if hasattr(item, "to_dict"):
        return item.to_dict()
    return dict(vars(item))


def _size(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return dict(value) if isinstance(value, dict) else {}


def resolve_gpu(gpu: str | DeviceSpec | None) -> DeviceSpec:
    """A datasheet entry by name ("H100 SXM", "A100"); projections never use measured or CPU roofs."""
    spec = gpu if isinstance(gpu, DeviceSpec) else get_spec(gpu or DEFAULT_GPU)
    if spec.measured or spec.name == "cpu":
        raise ValueError(f"a projection needs a GPU's datasheet, not {spec.name} (measured)")
    return spec


def project(rows: Any, gpu: str | DeviceSpec | None = None) -> tuple[list[Projection], list[dict[str, Any]]]:
    """(one Projection per task, size and dtype with counted FLOPs and bytes, rows left out with a `reason`).

    rows: Results, store rows (dicts) or a store DataFrame; any clock, any status: the counted work is the
    task's, whatever the candidate did."""
    spec = resolve_gpu(gpu)
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        rows = rows.to_dict("records")
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    left: list[dict[str, Any]] = []
    for item in rows or []:
        r = _row(item)
        name = str(r.get("candidate_name") or r.get("name") or "?")
        flops, nbytes = _num(r.get("flops")), _num(r.get("bytes"))
        if not flops or not nbytes:
            left.append({"name": name, "task": r.get("task", ""), "device": r.get("device_name") or r.get("device")
                         or "", "status": r.get("status", ""),
                         "reason": "no FLOP count" if nbytes else "no counted work (FLOPs and bytes)"})
            continue
        size, dtype = _size(r.get("size")), str(r.get("dtype") or _size(r.get("size")).get("dtype") or "")
        key = (str(r.get("task") or ""), json.dumps(size, sort_keys=True, default=str), dtype)
        group = groups.setdefault(key, {"size": size, "flops": flops, "bytes": nbytes, "names": []})
        if name not in group["names"]:
            group["names"].append(name)
    out = [Projection(task, g["size"], dtype, g["flops"], g["bytes"], spec.name, spec.peak(dtype or "float32"),
                      spec.memory_bandwidth, tuple(g["names"]))
           for (task, _, dtype), g in groups.items()]
    return sorted(out, key=lambda p: (p.intensity, p.task)), left


def projection_text(result: Any, gpu: str | DeviceSpec | None = None) -> str | None:
    """"0.625 FLOP/B: memory-bound on H100 SXM, floor 1.91 ns (projection of the counted work, not measured)" for
    a result with counted work that has no measured SOL (interpreter or CPU times); None otherwise."""
    if getattr(result, "sol_fraction", None) is not None:
        return None
    projected, _ = project([result], gpu)
    if not projected:
        return None
    p = projected[0]
    return (f"{p.intensity:.3g} FLOP/B: {p.bound}-bound on {p.gpu}, floor {fmt_seconds(p.floor_s)} "
            "(projection of the counted work, not measured)")
