"""How the judge evaluated, beside the verdict: the runner, the reference, timing, seconds and memory. A typed record on
the caller/judge channel that becomes `Result.protocol`; it decides nothing (docs/architecture.md lists where each field
is measured)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: Bumped when a field changes meaning; a judge and a caller of different versions refuse each other's messages.
DIAGNOSTICS_VERSION = 1


@dataclass
class Diagnostics:
    """Fields are None (or empty) until the stage that knows them sets them (`set`)."""

    version: int = DIAGNOSTICS_VERSION
    # -- the candidate's runner --
    runner: str | None = None  # "started" or "spare" (started ahead during the previous candidate)
    runner_pid: int | None = None
    runner_start_s: float | None = None
    runner_warmup_s: float | None = None
    transport: str | None = None  # how shared memory reaches the runner: "cuda-ipc" or "fd"
    transport_note: str | None = None
    ipc_namespace: str | None = None
    triton_cache: str | None = None
    triton_entries_lent: int | None = None
    load_seconds: float | None = None
    compile_seconds: float | None = None
    compile_cache: str | None = None  # CUDA builds: "hit", "miss" or "stored"
    compile_pauses: dict[str, float] = field(default_factory=dict)
    kernel_tracer: str | None = None
    tuned_config: str | None = None  # what the candidate's autotuner chose (Helion), also in Result.metadata
    # -- the reference --
    reference_cache: str | None = None  # "hit": the correctness rounds came from an earlier candidate of the task
    reference_rounds_ahead: int | None = None
    reference_rounds_during_calls: int | None = None
    float64_reference: str | None = None  # where the float64 reference ran: "device", "device-chunked", "host"
    models_built_on: str | None = None
    reference_timed_in: str | None = None  # "runner", "runner (kept)" or "judge: why"
    reference_runner_wait_s: float | None = None
    reference_compile: dict[str, Any] = field(default_factory=dict)
    compiled_reference: str | None = None
    # -- phases and memory --
    calibration: str | None = None  # "measured" or "reused"
    timing_pool: str | None = None  # "new" or "kept"
    calibrate_phases: dict[str, float] = field(default_factory=dict)
    check_phases: dict[str, float] = field(default_factory=dict)
    timing_phases: dict[str, float] = field(default_factory=dict)
    judge_memory_gib: dict[str, float] = field(default_factory=dict)
    memory_booked_gib: float | None = None  # a large evaluation's booking on its GPU (`judge/memory_admission.py`)
    memory_wait_s: float | None = None  # seconds it waited for room
    out_of_memory_retry: str | None = None
    out_of_memory: bool | None = None  # the judge or the candidate ran out of GPU memory (the caller may retry alone)
    gpu_alone: str | None = None  # set by the caller: evaluated again with the GPU to itself (`dispatch/pool.py`)
    judge_restarted: str | None = None  # set by the caller: its judge died and a fresh one evaluated it
    # -- timing --
    timing_basis: str | None = None
    timing_input_sets: int | None = None
    timed_batches: int | None = None
    dropped_batches: int | None = None
    checked_timed_calls: int | None = None
    candidate_first_batches: int | None = None
    memory_released_rounds: int | None = None
    calls_per_batch: int | None = None
    warmup_rounds: int | None = None
    harness: dict[str, Any] = field(default_factory=dict)
    judge_harness: dict[str, Any] = field(default_factory=dict)
    clock_check: dict[str, Any] = field(default_factory=dict)
    speedup_ci_method: str | None = None
    speedup_band: float | None = None
    # -- the verdict's inputs and the judge's own seconds --
    evidence: dict[str, str] = field(default_factory=dict)  # how each evidence level was established
    ceilings: str | None = None  # why the roofline ceilings could not be measured
    evaluation_s: float | None = None
    judge_s: float | None = None

    def set(self, **values: Any) -> None:
        """Set fields by name; a name the record does not declare is an error (a typo never goes unseen)."""
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise AttributeError(f"Diagnostics has no field(s) {', '.join(unknown)}")
        for name, value in values.items():
            setattr(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        """The fields that were set, as `Result.protocol` carries them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "version" and getattr(self, f.name) not in (None, {}, [])}
