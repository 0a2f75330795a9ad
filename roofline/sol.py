"""Speed-of-light arithmetic for one result: floor time, SOL fraction, bound, SOL score, faster-than-physics.

    floor       = max(FLOPs / peak(dtype), bytes / bandwidth)        the least time the work can take
    SOL         = floor / measured                                   1.0 = at the hardware limit
    bound       = "compute" if FLOPs / peak > bytes / bandwidth else "memory"
    intensity   = FLOPs / bytes                                      (FLOP/byte)

SOL score, as defined by SOL-ExecBench (Lin et al., "SOL-ExecBench: Speed-of-Light Benchmarking for Real-World
GPU Kernels Against Hardware Limits", arXiv 2603.19173, 2026; `sol_score` in src/sol_execbench/sol_score.py of
its code): the candidate's time T_k placed between a baseline time T_b and the floor T_SOL on a 0..1 scale,

    S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))

so S = 1 at the floor, 0.5 when the candidate only matches the baseline, -> 0 as it gets slower; as upstream,
S = 1 if T_b <= T_SOL and T_k <= T_SOL, else 0 in that degenerate case. We clip to [0, 1] (a time below the
floor is a broken measurement, flagged separately). Baseline here: the task's eager PyTorch reference timed
in the same worker (`sol_score`), and torch.compile's time when measured (`sol_score_vs_compile`: upstream
uses an optimized PyTorch implementation as the baseline, so this one is the closer match).

Faster than physics: a measured median below `PHYSICS_MARGIN` x the physical floor is a broken measurement or
a cheat, never a win (docs/anti-cheating.md, cheat 13). The physical floor is built only on true lower bounds: the minimal bytes
(every input read once, every output written once) over the bandwidth, and the task's `min_flops` (a FLOP count
no correct implementation can go below) over the peak where the task declares one. The reference's own FLOP count
is *not* a lower bound: a diagonal-matrix matmul done as a row scaling does N^2 work where the reference's dense
matmul does 2 N^3, and that win is real (docs/verdicts.md). The physical floor uses the most generous rates the
hardware has
(`DeviceSpec.limit`: TF32 tensor cores for fp32 operands, the datasheet bandwidth or the measured one when
higher), and the margin absorbs boost clocks and timer noise. A GPU missing from the datasheet table is judged
on its measured ceilings, with `MEASURED_HEADROOM` more bandwidth than the copy reached (a read-mostly kernel
beats a copy by a few percent, and copies typically reach 85-95% of the datasheet bandwidth) and the fastest
measured matmul rate as the compute limit.

On the CPU the compute roof is measured (no datasheet gives a usable CPU FLOP/s) and the timing does not flush
caches, so the memory term counts the bytes at the bandwidth of the cache level the working set fits in: L1, L2,
the last-level cache (sizes from sysfs), else DRAM (the measured copy with `MEASURED_HEADROOM`). No datasheet gives
cache bandwidths either, so those roofs are upper bounds by construction: `CPU_BYTES_PER_CYCLE` per level (more than
any shipping core moves per cycle) at the highest clock any core reports, and never less than `CPU_CLOCK_HZ`. The
candidate is timed on one core (more is `thread-use`), so these are per-core figures. Since every CPU roof is a
generous bound, a time below `CPU_PHYSICS_MARGIN` x floor is out of reach; a busy host only makes times longer.
Triton-interpreter times are not hardware: no SOL, no verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from roofline.specs import DeviceSpec, match_device_name
from workbench.result import Result
from workbench.tasks.task import Task

#: A GPU time below floor x this margin is impossible (boost clocks and timer noise stay above it).
PHYSICS_MARGIN = 0.9
#: The same on a CPU, whose roofs are generous upper bounds per cache level (module doc).
CPU_PHYSICS_MARGIN = 0.5
#: Bytes one core can move per cycle at most, per cache level (loads plus stores): shipping cores load two or three
#: and store one or two 64-byte vectors per cycle from L1, fill 64 bytes per cycle from L2, less from the LLC.
CPU_BYTES_PER_CYCLE = {1: 256, 2: 128, 3: 64}
#: The clock those are counted at: the highest any core reports, x 1.1, and at least this.
CPU_CLOCK_HZ = 6.5e9
#: On measured roofs the physics check allows this much more bandwidth than the measured copy reached.
MEASURED_HEADROOM = 1.15


@dataclass(frozen=True)
class Roof:
    """The ceilings a point is judged against. `peak_flops`/`bandwidth` give the SOL floor; `limit_*` (default:
    the same) the faster-than-physics floor; `cache_levels` (CPU): (name, bytes, bandwidth) smallest first, the
    bandwidth the physics floor uses for a working set that fits in that level."""

    name: str
    peak_flops: float
    bandwidth: float
    source: str  # "datasheet" or "measured"
    limit_flops: float | None = None
    limit_bandwidth: float | None = None
    margin: float = PHYSICS_MARGIN
    cache_levels: tuple[tuple[str, int, float], ...] = ()


@dataclass(frozen=True)
class SOL:
    """Where one timed run sits under its roof."""

    floor_s: float
    fraction: float | None
    bound: str
    intensity: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    faster_than_physics: bool
    compute_s: float = 0.0
    memory_s: float = 0.0
    physics_floor_s: float = 0.0
    #: Where the physics floor's bytes come from: a cache level ("L2") or "memory".
    physics_level: str = "memory"


def _pos(x: Any) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) and x > 0 else 0.0


def floor_time(flops: float | None, nbytes: float | None, roof: Roof) -> tuple[float, str]:
    """(seconds, bound): the time the work needs at the roof's rates, and which term sets it."""
    compute = _pos(flops) / roof.peak_flops
    memory = _pos(nbytes) / roof.bandwidth
    return max(compute, memory), ("compute" if compute > memory else "memory")


def memory_level(nbytes: float, roof: Roof) -> tuple[str, float]:
    """(level, bandwidth) the physics floor moves `nbytes` at: the smallest cache level they fit in (never slower than
    memory), else memory."""
    bandwidth = roof.limit_bandwidth or roof.bandwidth
    for name, capacity, level_bandwidth in roof.cache_levels:
        if nbytes <= capacity:
            return name, max(bandwidth, level_bandwidth)
    return "memory", bandwidth


def physics_floor(min_flops: float | None, nbytes: float | None, roof: Roof) -> float:
    """The least time physically possible: true lower bounds only (minimal bytes; `min_flops`, the FLOPs any correct
    implementation needs, never the reference's count), the most generous rates, and the bytes at the bandwidth of
    the cache level they fit in (CPU: the timing does not flush caches)."""
    compute = _pos(min_flops) / (roof.limit_flops or roof.peak_flops)
    nbytes = _pos(nbytes)
    return max(compute, nbytes / memory_level(nbytes, roof)[1])


def sol(flops: float | None, nbytes: float | None, seconds: float | None, roof: Roof, *,
        min_flops: float | None = None) -> SOL:
    """Floor, SOL fraction, bound, intensity, achieved rates and the physics verdict of one timed run. `flops` (the
    reference's work) sets the SOL floor; only `min_flops` (a true lower bound, None when unknown) and `nbytes`
    enter the physics verdict."""
    compute, memory = _pos(flops) / roof.peak_flops, _pos(nbytes) / roof.bandwidth
    floor, bound = floor_time(flops, nbytes, roof)
    hard = physics_floor(min_flops, nbytes, roof)
    level = memory_level(_pos(nbytes), roof)[0]
    intensity = _pos(flops) / _pos(nbytes) if _pos(flops) and _pos(nbytes) else None
    t = _pos(seconds)
    if not t:
        return SOL(floor, None, bound, intensity, None, None, False, compute, memory, hard, level)
    return SOL(floor, floor / t, bound, intensity, _pos(flops) / t or None, _pos(nbytes) / t or None,
               t < hard * roof.margin, compute, memory, hard, level)


def sol_score(t_ref: float | None, t_cand: float | None, floor: float) -> float | None:
    """SOL-ExecBench score of a candidate time against a baseline time and the floor (see the module doc)."""
    t_ref, t_cand = _pos(t_ref), _pos(t_cand)
    if not t_ref or not t_cand:
        return None
    gap = t_ref - floor
    if gap <= 0:
        return 1.0 if t_cand <= floor else 0.0
    denom = 1.0 + (t_cand - floor) / gap
    if denom <= 0:
        return 1.0
    return min(1.0, max(0.0, 1.0 / denom))


def gap_closed(t_ref: float | None, t_cand: float | None, floor: float) -> float | None:
    """Share of the reference-to-floor gap the candidate closes: (t_ref - t) / (t_ref - floor), unclipped
    (negative = slower than the reference). Kept beside the score because it reads as a plain percentage."""
    t_ref, t_cand = _pos(t_ref), _pos(t_cand)
    if not t_ref or not t_cand or t_ref <= floor:
        return None
    return (t_ref - t_cand) / (t_ref - floor)


# ---- choosing the roof -----------------------------------------------------------------------------------

def roof_for(spec: Any, dtype: object) -> Roof:
    """The roof for `dtype` on a DeviceSpec (datasheet, or measured when `spec.measured`) or on Ceilings."""
    from roofline.ceilings import Ceilings

    if isinstance(spec, Ceilings):
        cpu = spec.device == "cpu" or spec.device_name.startswith("cpu")
        return _measured_roof(spec.device_name, spec.peak(dtype), spec.copy_bandwidth, spec.matmul_flops,
                              cpu_cache_roofs(spec.details) if cpu else ())
    if spec.measured:
        cpu = spec.name == "cpu"
        return _measured_roof(spec.name, spec.peak(dtype), spec.memory_bandwidth, spec.peaks,
                              cpu_cache_roofs({}) if cpu else ())
    return Roof(spec.name, spec.peak(dtype), spec.memory_bandwidth, "datasheet", spec.limit(dtype))


def cpu_cache_roofs(details: dict[str, Any]) -> tuple[tuple[str, int, float], ...]:
    """(name, bytes, bandwidth) per CPU cache level, from the ceilings' `details` (levels and the highest clock, as
    measured) or this machine's sysfs (module doc)."""
    from roofline.ceilings import cpu_cache_levels, cpu_max_clock_hz

    levels = details.get("cache_levels") or cpu_cache_levels()
    clock = max(CPU_CLOCK_HZ, 1.1 * float(details.get("max_clock_hz") or cpu_max_clock_hz()))
    return tuple((f"L{int(level)}", int(size), CPU_BYTES_PER_CYCLE.get(int(level), min(CPU_BYTES_PER_CYCLE.values()))
                  * clock) for level, size in sorted(levels))


def _measured_roof(name: str, peak: float, bandwidth: float, rates: dict[str, float],
                   cache_levels: tuple[tuple[str, int, float], ...]) -> Roof:
    """SOL against what was measured; the physics check against the fastest measured path plus headroom (and, on a
    CPU, the cache levels' roofs)."""
    return Roof(name, peak, bandwidth, "measured", max([peak, *rates.values()]), bandwidth * MEASURED_HEADROOM,
                CPU_PHYSICS_MARGIN if cache_levels else PHYSICS_MARGIN, cache_levels)


def _with_datasheet_limits(roof: Roof, spec: DeviceSpec | None, dtype: object) -> Roof:
    """Measured roofs for SOL, but the physics check never stricter than the datasheet of the same device."""
    if spec is None:
        return roof
    return Roof(roof.name, roof.peak_flops, roof.bandwidth, roof.source,
                max(roof.limit_flops or roof.peak_flops, spec.limit(dtype)),
                max(roof.limit_bandwidth or roof.bandwidth, spec.memory_bandwidth), roof.margin, roof.cache_levels)


def roof_for_result(result: Result, ceilings: Any = None) -> Roof | None:
    """The roof a result is judged on. `ceilings` (Ceilings, DeviceSpec or Roof) wins; otherwise a GPU in the
    datasheet table gets its datasheet, an unknown GPU and the CPU their measured (cached) ceilings. None for
    interpreter times and when nothing can be measured."""
    if result.timing is None or result.timing.clock == "interpreter":
        return None
    dtype = result.dtype or "float32"
    gpu = str(result.device).startswith("cuda") or result.timing.clock == "cuda-events"
    spec = match_device_name(result.device_name or "") if gpu else None
    if isinstance(ceilings, Roof):
        return ceilings
    if ceilings is not None:
        return _with_datasheet_limits(roof_for(ceilings, dtype), spec, dtype)
    if spec is not None:
        return roof_for(spec, dtype)
    try:
        from roofline.ceilings import get_ceilings

        return roof_for(get_ceilings(result.device if gpu else "cpu"), dtype)
    except Exception:  # noqa: BLE001 - no roof is a note on the result, not a failure of the evaluation
        return None


# ---- filling a Result --------------------------------------------------------------------------------

def _work(result: Result, task: Task, counted: dict[str, Any] | None) -> tuple[float | None, float | None, str]:
    """(FLOPs, bytes, source): the task's formulas, else the worker's counts, else counted here (no compute)."""
    size = result.size or {}
    flops = nbytes = None
    sources = []
    for attr in ("flops", "bytes"):
        formula = getattr(task, attr)
        value = None
        if formula is not None:
            try:
                value = float(formula(size))
                sources.append("task")
            except Exception:  # noqa: BLE001 - a formula that cannot read this size falls back to counting
                value = None
        if value is None and counted and counted.get(attr) is not None:
            value = float(counted[attr])
            sources.append("counted")
        if attr == "flops":
            flops = value
        else:
            nbytes = value
    if nbytes is None:
        try:
            from roofline.counting import count_reference

            work = count_reference(task, size)
            flops = flops if flops is not None else work.flops
            nbytes = work.bytes
            sources.append("counted")
        except Exception:  # noqa: BLE001 - without bytes there is no roofline, which the metadata says
            pass
    kinds = set(sources)
    return flops, nbytes, (kinds.pop() if len(kinds) == 1 else "task+counted" if kinds else "none")


def _min_flops(task: Task, size: dict[str, Any]) -> float | None:
    """The task's declared lower bound on FLOPs at `size`; None when it declares none or cannot evaluate it."""
    formula = getattr(task, "min_flops", None)
    if formula is None:
        return None
    try:
        return float(formula(size))
    except Exception:  # noqa: BLE001 - a bound that cannot be computed is no bound
        return None


def _point(result: Result, task: Task, flops: float | None, nbytes: float | None, ceilings: Any
           ) -> tuple[SOL, Roof, float | None] | str:
    """(SOL point, roof, min FLOPs) of a timed result; a note saying why there is none otherwise."""
    if result.timing is None:
        return "not timed"
    if result.timing.clock == "interpreter":
        return "no SOL on the Triton interpreter: it is not hardware; evaluate on a GPU for a roofline"
    if not nbytes:
        return "no SOL: the bytes this task moves are unknown (give it a `bytes` formula)"
    roof = roof_for_result(result, ceilings)
    if roof is None:
        return "no SOL: no roofline for this device (neither a datasheet entry nor ceilings)"
    min_flops = _min_flops(task, result.size or {})
    return sol(flops, nbytes, result.timing.median_ms / 1e3, roof, min_flops=min_flops), roof, min_flops


def faster_than_physics(result: Result, task: Task, counted: dict[str, Any] | None = None,
                        ceilings: Any = None) -> str:
    """What makes `result`'s time impossible (measured against the physical floor), or "" when it is not: the
    judge's verdict calls this before it answers (`workbench.eval.judge.verdict.physics`)."""
    flops, nbytes, _ = _work(result, task, counted)
    point = _point(result, task, flops, nbytes, ceilings)
    if isinstance(point, str) or not point[0].faster_than_physics:
        return ""
    p, roof, _ = point
    assert result.timing is not None
    where = f", bytes from {p.physics_level}" if roof.cache_levels else ""
    return (f"measured {result.timing.median_ms:.4g} ms, floor {p.physics_floor_s * 1e3:.4g} ms on {roof.name} "
            f"{roof.source}{where}; a time below {roof.margin:g} x floor is impossible")


def annotate_result(result: Result, task: Task, counted: dict[str, Any] | None = None,
                    ceilings: Any = None) -> Result:
    """Fill FLOPs, bytes, achieved FLOP/s and B/s, SOL fraction, bound and SOL score of `result` (in place, and
    returned). Numbers only: the status is the judge's (a time below the physical floor was rejected there).
    `counted` is the judge's count on the reference ({"flops", "bytes"}); `ceilings` overrides the roof."""
    flops, nbytes, source = _work(result, task, counted)
    result.flops, result.bytes = flops, nbytes
    result.metadata["work_source"] = source
    point = _point(result, task, flops, nbytes, ceilings)
    if isinstance(point, str):
        if result.timing is not None:
            result.metadata["sol_note"] = point
        return result
    p, roof, min_flops = point
    assert result.timing is not None
    seconds = result.timing.median_ms / 1e3
    if min_flops is not None:
        result.metadata["min_flops"] = min_flops
    result.achieved_flops_per_s = p.achieved_flops_per_s
    result.achieved_bytes_per_s = p.achieved_bytes_per_s
    result.sol_fraction = p.fraction
    result.bound = p.bound
    result.metadata.update(floor_ms=p.floor_s * 1e3, physics_floor_ms=p.physics_floor_s * 1e3,
                           physics_level=p.physics_level, intensity=p.intensity, roof=roof.name,
                           roof_source=roof.source, sol_score_baseline="eager PyTorch reference")
    if result.reference_timing:
        t_ref = result.reference_timing.median_ms / 1e3
        result.metadata["reference_sol_fraction"] = p.floor_s / t_ref if t_ref else None
        result.metadata["sol_score"] = sol_score(t_ref, seconds, p.floor_s)
        result.metadata["sol_gap_closed"] = gap_closed(t_ref, seconds, p.floor_s)
    if result.compiled_reference_timing:
        result.metadata["sol_score_vs_compile"] = sol_score(result.compiled_reference_timing.median_ms / 1e3,
                                                            seconds, p.floor_s)
    return result
