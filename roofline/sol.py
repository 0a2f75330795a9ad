"""Speed-of-light arithmetic: floor time, SOL fraction, bound, score, and the faster-than-physics check.

floor = max(FLOPs / peak(dtype), bytes / bandwidth); SOL fraction = floor / measured; bound = whichever term is
larger. The score follows the idea of SOL-ExecBench's speed-of-light scoring: the share of the gap between the
reference time and the floor that the candidate closes, (t_ref - t) / (t_ref - floor): 0 = no better than the
reference, 1 = at the hardware limit, negative = slower than the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofline.specs import DeviceSpec, match_device_name
from workbench.findings import FLAGS
from workbench.result import Result
from workbench.task import Task

#: A measured time below floor x this margin is impossible (clock boost and timer noise stay above it).
PHYSICS_MARGIN = 0.9


@dataclass(frozen=True)
class Roof:
    """The two ceilings a point is judged against."""

    name: str
    peak_flops: float
    bandwidth: float
    source: str  # "datasheet" or "measured"


@dataclass(frozen=True)
class SOL:
    floor_s: float
    fraction: float | None
    bound: str
    intensity: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    faster_than_physics: bool


def floor_time(flops: float | None, nbytes: float | None, roof: Roof) -> tuple[float, str]:
    compute = (flops or 0.0) / roof.peak_flops
    memory = (nbytes or 0.0) / roof.bandwidth
    return max(compute, memory), ("compute" if compute > memory else "memory")


def sol(flops: float | None, nbytes: float | None, seconds: float | None, roof: Roof) -> SOL:
    floor, bound = floor_time(flops, nbytes, roof)
    intensity = (flops / nbytes) if flops and nbytes else None
    if not seconds or seconds <= 0:
        return SOL(floor, None, bound, intensity, None, None, False)
    return SOL(floor, floor / seconds, bound, intensity, (flops / seconds) if flops else None,
               (nbytes / seconds) if nbytes else None, seconds < floor * PHYSICS_MARGIN)


def sol_score(t_ref: float | None, t_cand: float | None, floor: float) -> float | None:
    if not t_ref or not t_cand or t_ref <= floor:
        return None
    return (t_ref - t_cand) / (t_ref - floor)


def roof_for(spec: DeviceSpec, dtype: str) -> Roof:
    return Roof(spec.name, spec.peak(dtype), spec.memory_bandwidth, "datasheet")


def roof_for_result(result: Result) -> Roof | None:
    """The roofline a result is judged on: the datasheet for a known GPU, measured ceilings for a CPU."""
    dtype = result.dtype or "float32"
    if result.timing is None or result.timing.clock == "interpreter":
        return None
    if result.timing.clock == "cuda-events":
        spec = match_device_name(result.device_name or "")
        if spec is not None:
            return roof_for(spec, dtype)
    try:
        from roofline.ceilings import get_ceilings

        c = get_ceilings("cuda" if result.timing.clock == "cuda-events" else "cpu")
        return Roof(c.device_name, c.peak(dtype), c.copy_bandwidth, "measured")
    except Exception:
        return None


def annotate_result(result: Result, task: Task, counted: dict[str, Any] | None = None, roof: Roof | None = None) -> Result:
    """Fill FLOPs, bytes, achieved rates, SOL fraction, bound and score; flag results above the roofline."""
    size = result.size or {}
    flops = float(task.flops(size)) if task.flops is not None else (counted or {}).get("flops")
    nbytes = float(task.bytes(size)) if task.bytes is not None else (counted or {}).get("bytes")
    result.flops, result.bytes = flops, nbytes
    result.metadata["work_source"] = "task" if task.flops is not None else "counted"
    if result.timing is None:
        return result
    if result.timing.clock == "interpreter":
        result.metadata["sol_note"] = "no SOL on the interpreter: it is not hardware"
        return result
    roof = roof or roof_for_result(result)
    if roof is None:
        return result
    seconds = result.timing.median_ms / 1e3
    point = sol(flops, nbytes, seconds, roof)
    result.achieved_flops_per_s = point.achieved_flops_per_s
    result.achieved_bytes_per_s = point.achieved_bytes_per_s
    result.sol_fraction = point.fraction
    result.bound = point.bound
    result.metadata.update(floor_ms=point.floor_s * 1e3, roof=roof.name, roof_source=roof.source)
    if result.reference_timing:
        t_ref = result.reference_timing.median_ms / 1e3
        result.metadata["reference_sol_fraction"] = point.floor_s / t_ref if t_ref else None
        result.metadata["sol_score"] = sol_score(t_ref, seconds, point.floor_s)
    if point.faster_than_physics and result.status == "ok":
        info = FLAGS["faster-than-physics"]
        result.status = "rejected"
        result.flags.append("faster-than-physics")
        result.message = (f"[faster-than-physics] {info.why} (measured {result.timing.median_ms:.4g} ms, floor "
                          f"{point.floor_s * 1e3:.4g} ms on {roof.name}). Fix: {info.fix}")
    return result
