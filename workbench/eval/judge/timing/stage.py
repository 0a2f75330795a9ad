"""The evaluation's timing in two steps around the candidate's import: `prepare` before it (the input pool and the
harness calibration on a null candidate), `run` after the checks passed (the timed pair, the speedup, its verdict)."""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from workbench import languages
from workbench.eval.checks import runtime as guards
from workbench.eval.checks.flags import Finding
from workbench.eval.judge import verdict
from workbench.eval.judge.reference.rounds import draws_random_numbers
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing.batches import Calibration, calibrate
from workbench.eval.judge.timing.inputs import MAX_SETS, InputPool
from workbench.eval.judge.timing.pair import TARGET_BATCH_S, PairTimer, ReferenceSide, stopping_rule
from workbench.eval.wire.diagnostics import Diagnostics
from workbench.eval.wire.tensors import clone_inputs, release_unused, sync

if TYPE_CHECKING:
    from workbench.eval.judge.timing.telemetry import Telemetry


@dataclass
class TimingPlan:
    """What `prepare` made: the timing inputs and the harness calibration."""

    pool: InputPool
    calibration: Calibration
    seeded: bool  # the reference draws random numbers: every timed call is seeded, on both sides
    calibration_reused: bool = False


def _estimate_ms(model: Any, inputs: list[Any], device: str) -> float:
    """The reference's ms per call over a few calls (it sizes the pool)."""
    with torch.no_grad():
        model(*clone_inputs(inputs))  # first-call costs out of the estimate
        sync(device)
        t0 = time.perf_counter()
        for _ in range(3):
            model(*inputs)
        sync(device)
    return (time.perf_counter() - t0) / 3 * 1e3


#: Seconds a calibration, or a timing of the compiled reference, serves later candidates of the task and size.
CALIBRATION_REUSE_S = 120.0


@dataclass
class ReferenceProfile:
    """What timing learns of a reference, kept per task and size in the judge (`Context.timing`)."""

    reference_ms: float
    seeded: bool
    calibration: Calibration | None = None
    calibrated_at: float = 0.0
    pool_sets: int = 0
    compiled: dict[str, Any] | None = None  # the last timing of the compiled reference (the same for every candidate)
    compiled_at: float = 0.0

    def recent_compiled(self) -> dict[str, Any] | None:
        return self.compiled if time.monotonic() - self.compiled_at < CALIBRATION_REUSE_S else None


def prepare(session: CandidateSession, reference: Any, ref_model: Any, size: dict, seed: int, device: str,
            timeout: float, interpreted: bool, known: ReferenceProfile | None = None,
            measuring: Callable[[], AbstractContextManager[Any]] = nullcontext,
            kept: InputPool | None = None) -> tuple[TimingPlan, ReferenceProfile]:
    """The input pool (sets for a candidate 4x faster than the reference, as fit) and the null calibration; `known`
    spares the estimate and a recent calibration and lends the `kept` pool. Measurements run inside `measuring()`."""
    if kept is not None and known is not None:
        return _planned(session, kept, known, timeout, measuring, attach=True), known
    if kept is not None:
        kept.free()
    first = reference.make_inputs(size, seed + 101, device, "default")
    with torch.no_grad():
        out = ref_model(*clone_inputs(first))
    if known is None:
        with measuring():
            estimate = _estimate_ms(ref_model, first, device)
        known = ReferenceProfile(estimate, draws_random_numbers(ref_model, first, device))
    target = TARGET_BATCH_S["cuda" if device.startswith("cuda") else "cpu"] * 1e3
    wanted = 3 if interpreted else max(2, min(MAX_SETS, math.ceil(4 * target / max(known.reference_ms, 1e-3))))
    pool = InputPool.create(session, reference, size, device, first, out, wanted, random.SystemRandom())
    del first, out
    release_unused(device)  # the estimate's temporaries: the candidate's runner needs the memory
    return _planned(session, pool, known, timeout, measuring), known


def _planned(session: CandidateSession, pool: InputPool, known: ReferenceProfile, timeout: float,
             measuring: Callable[[], AbstractContextManager[Any]], attach: bool = False) -> TimingPlan:
    """The plan on `pool` (a kept one `attach`ed first), calibrated again unless recently on as many sets."""
    try:
        if attach:
            pool.attach(session)
        fresh = known.calibration is not None and known.pool_sets == pool.n and \
            time.monotonic() - known.calibrated_at < CALIBRATION_REUSE_S
        if not fresh:
            measured = time.perf_counter()
            with measuring():
                known.calibration = calibrate(session, pool, timeout, known.seeded)
            known.calibrated_at, known.pool_sets = time.monotonic(), pool.n
            pool.phases["calibration"] = round(time.perf_counter() - measured, 4)
        return TimingPlan(pool, known.calibration, known.seeded, calibration_reused=fresh)
    except BaseException:
        pool.free()  # its memory is the judge's own: nothing else would give it back
        raise


def _telemetry(device: str) -> Telemetry | None:
    """NVML sensors for the device's timed batches (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    from workbench.eval.judge.timing.telemetry import Telemetry

    index = torch.device(device).index or 0
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # noqa: BLE001 - older torch: fall back to the index
        uuid = None
    # Sustained heavy kernels run at the power cap by design: flagged in the telemetry, not dropped.
    return Telemetry(index, uuid=uuid, keep_power_capped=True)


def run(session: CandidateSession, model_id: int, plan: TimingPlan, side: ReferenceSide, device: str,
        candidate_language: str, reps: int | None, result: dict[str, Any], diagnostics: Diagnostics,
        known: ReferenceProfile | None = None) -> list[Finding]:
    """Time the pair into `result` and `diagnostics`; the findings. `known` lends and keeps the compiled timing."""
    reused = known.recent_compiled() if known is not None and side.compiled is not None else None
    if reused is not None:
        side = dataclasses.replace(side, compiled=None)
    interpreted = languages.get(candidate_language).interpreted(device)
    clock = "cuda-events" if device.startswith("cuda") else ("interpreter" if interpreted else "wall")
    rule = stopping_rule(device, interpreted, reps)
    sensors = _telemetry(device)
    try:
        outcome = PairTimer(session, model_id, side, plan.pool, plan.calibration, rule, device, clock,
                            telemetry=sensors, seeded=plan.seeded).run()
    finally:
        if sensors is not None:
            result["telemetry"] = sensors.summary()
            sensors.close()
    if outcome.candidate is None or outcome.reference is None:
        return outcome.findings
    if clock != "interpreter":  # an interpreter time is never set beside compiled code's: no reference time at all
        ab = verdict.speedup(outcome.reference.samples_ms, outcome.candidate.samples_ms, paired=True)
        result.update(speedup=ab.speedup, speedup_ci=[ab.low, ab.high], speedup_verdict=ab.verdict,
                      speedup_basis="gpu-only" if clock == "cuda-events" else "wall",
                      reference_timing=outcome.reference.to_dict())
        outcome.protocol.update(speedup_ci_method=ab.method, speedup_band=round(ab.band, 4))
    result["timing"] = outcome.candidate.to_dict()
    if outcome.compiled is not None:
        result["compiled_reference_timing"] = outcome.compiled.to_dict()
        outcome.protocol["compiled_reference"] = "timed"
        if known is not None:
            known.compiled, known.compiled_at = dict(result["compiled_reference_timing"]), time.monotonic()
    elif reused is not None:
        result["compiled_reference_timing"] = dict(reused)
        age = time.monotonic() - known.compiled_at if known is not None else 0.0
        outcome.protocol["compiled_reference"] = f"reused: timed for an earlier candidate of this task {age:.0f} s ago"
    if outcome.judge_clock is not None:
        result["judge_clock_timing"] = outcome.judge_clock.to_dict()
    result.setdefault("details", {}).setdefault("notes", []).extend(outcome.notes)
    diagnostics.set(**outcome.protocol)
    return outcome.findings


def cover(session: CandidateSession, model_id: int, plan: TimingPlan, source: str, policy: str,
          median_ms: float) -> tuple[float | None, list[Finding]]:
    """GPU: the share of kernel time in the candidate's own kernels, and whether the work happens on the host."""
    kernels = session.profile(model_id, plan.pool.sets[0])
    coverage, findings = guards.judge_coverage(kernels, guards.own_kernel_names(source), policy)
    findings += guards.judge_host_work(kernels, median_ms)
    return coverage, findings
