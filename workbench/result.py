"""Typed records that cross the worker boundary: Timing and Result."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

#: Every status a Result can carry; "ok" is the only passing one. "cancelled": the caller stopped the evaluation
#: (EvalOptions.cancel); nothing was judged, and `evaluate` never stores it.
STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect", "rejected", "cancelled")
#: A/B verdicts of a speedup (its 95% CI against 1 within the noise band): see workbench.eval.judge.timing.stats.
SPEEDUP_VERDICTS = ("faster", "slower", "same", "inconclusive")
#: The kernel policy a declared PyTorch baseline (`Candidate(language="torch")`) is judged under: timed, the task's
#: kernel policy not applied.
BASELINE_POLICY = "baseline"


def kernel_policy_text(policy: str) -> str:
    """How every surface names a Result's kernel policy: a baseline says the policy was not applied."""
    return "PyTorch baseline: kernel policy not applied" if policy == BASELINE_POLICY else policy


@dataclass
class Timing:
    """Statistics of repeated runs in milliseconds. `clock` says what measured them.

    clock: "cuda-events" (GPU), "wall" (compiled CPU code) or "interpreter" (Triton interpreter: never
    compared with compiled code).
    """

    median_ms: float
    min_ms: float
    max_ms: float
    #: Interquartile range, a robust spread.
    iqr_ms: float
    #: 95% confidence interval of the median (order-statistic / binomial method).
    ci95_low_ms: float
    ci95_high_ms: float
    n: int
    clock: str
    samples_ms: list[float] = field(default_factory=list, repr=False)
    #: Runs in which work was still pending on another stream after the current stream finished (GPU);
    #: those runs are timed up to the full device synchronize (docs/anti-cheating.md, cheat 7).
    side_stream_runs: int = 0
    #: Why timing stopped: "ci-target" (the 95% CI of the median reached the target relative width),
    #: "time-cap", "max-reps", "fixed" (a fixed number of reps was asked for), or "with-pair" (the compiled
    #: reference, an aside timed in every other batch, stopped when the reference and the candidate did); "" when
    #: unknown.
    stop_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Result:
    """One evaluation: candidate x task x size x device. Failed candidates are results too."""

    task: str
    candidate_id: str
    candidate_name: str
    language: str
    status: str
    message: str = ""
    flags: list[str] = field(default_factory=list)
    #: Non-fatal observations (warn-level checks, interpreter caveats, weak-task notes).
    warnings: list[str] = field(default_factory=list)
    size: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    device: str = "cpu"
    device_name: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    timing: Timing | None = None
    reference_timing: Timing | None = None
    compiled_reference_timing: Timing | None = None
    #: reference / candidate: the median over the timed rounds of the two sides' batch means (each round times both
    #: back to back, so the machine's drift cancels in its ratio); the ratio of the two medians for results stored
    #: before rounds were paired.
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    #: 95% confidence interval (low, high) of `speedup`, and what it says: faster | slower | same | inconclusive.
    speedup_ci: tuple[float, float] | None = None
    speedup_verdict: str | None = None
    #: Which reference time the headline speedup divides: "gpu-only" (host launch gaps hidden), "with-launch"
    #: (as KernelBench's harness times it) or "cuda-graph".
    speedup_basis: str = ""
    #: The eager reference timed with the host's launch gaps included (KernelBench's way), beside the GPU-only one
    #: (results stored before the judge's clock decided timing; no longer measured).
    launch_reference_timing: Timing | None = None
    #: The candidate per call by the judge's clock: each timed batch's bracket, from request to reply, less the
    #: harness cost measured on a null candidate before the candidate was imported. `timing` (the runner's own
    #: clock) is accepted only where it agrees with this (docs/trust-boundary.md).
    judge_clock_timing: Timing | None = None
    #: Seconds per evaluation stage: scan, load, calibrate, check, count, time, cover (and `eval_seconds` in
    #: metadata for the whole call, the judge's start-up included when it had to start).
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Share of GPU kernel time spent in the candidate's own kernels (GPU only; None where not measured).
    coverage: float | None = None
    #: Kernel policy the verdict used: "strict" (torch compute in forward is rejected), "partial" or "baseline" (a
    #: declared PyTorch baseline: the task's policy was not applied).
    kernel_policy: str = ""
    #: Precision policy applied to reference and candidate alike, e.g. "ieee" (no TF32, full-precision
    #: reductions) or "tf32".
    precision: str = ""
    #: How errors were judged: tolerance, k, the native reference's own error and the bound actually used.
    error_budget: dict[str, Any] = field(default_factory=dict)
    #: The sandbox tier the candidate ran under: "namespaces+seccomp" (Linux user/pid/mount/net namespaces and a
    #: syscall filter), "landlock+seccomp" (no namespaces: writes confined, no network, the filter), or "none";
    #: a missing part is named in protocol["sandbox_reason"] (workbench/sandbox/confinement.py).
    sandbox: str = ""
    #: What each verdict input rests on: {"outputs", "time", "launches", "coverage"} -> "judge" (measured by the judge),
    #: "corroborated" (reported by the runner, checked against what the judge measured), "unverified" (the runner's
    #: word only), "contradicted" or "n/a"; `protocol["evidence"]` says how each was established
    #: (workbench/eval/checks/evidence.py). A strict-policy "ok" has its launches corroborated.
    evidence: dict[str, str] = field(default_factory=dict)
    #: Clocks, power and throttle reasons sampled around timed batches (NVML; empty where unavailable).
    telemetry: dict[str, Any] = field(default_factory=dict)
    #: Protocol decisions that depend on the machine: input copies rotated, where the float64 reference ran,
    #: checked timed calls, compile seconds and whether the compile cache was hit.
    protocol: dict[str, Any] = field(default_factory=dict)
    flops: float | None = None
    bytes: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    sol_fraction: float | None = None
    bound: str | None = None
    source_hash: str = ""
    task_hash: str = ""
    source: str = field(default="", repr=False)
    seed: int = 0
    versions: dict[str, str] = field(default_factory=dict)
    timestamp: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    #: Last lines the worker printed before a crash/timeout, and other diagnostics.
    log: str = field(default="", repr=False)
    #: Correctness details (per-round errors, error heatmap for 2-D outputs) for widgets.
    details: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Free provenance: parent id, prompt id, study run id, parameters.
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def time_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        data = dict(data)
        timing_fields = {f.name for f in dataclasses.fields(Timing)}
        for key in ("timing", "reference_timing", "compiled_reference_timing", "launch_reference_timing",
                    "judge_clock_timing"):
            if isinstance(data.get(key), dict):
                data[key] = Timing(**{k: v for k, v in data[key].items() if k in timing_fields})
        if isinstance(data.get("speedup_ci"), list):
            data["speedup_ci"] = tuple(data["speedup_ci"])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def evidence_text(self) -> str:
        """'outputs judge · time judge · launches corroborated', or "" for a result without evidence levels."""
        from workbench.eval.checks.evidence import summary

        return summary(self.evidence) if self.evidence else ""

    def summary(self) -> str:
        """One line for logs and the CLI."""
        parts = [f"{self.task}/{self.candidate_name}: {self.status}"]
        if self.flags:
            parts.append(f"flags={','.join(self.flags)}")
        if self.timing:
            parts.append(f"{self.timing.median_ms:.4g} ms ({self.timing.clock})")
        if self.speedup is not None:
            ci = f" [{self.speedup_ci[0]:.2f}, {self.speedup_ci[1]:.2f}]" if self.speedup_ci else ""
            verdict = f" {self.speedup_verdict}" if self.speedup_verdict else ""
            parts.append(f"speedup {self.speedup:.2f}x{ci}{verdict}")
        if self.sandbox and not self.sandbox.startswith("namespaces"):
            parts.append(f"sandbox={self.sandbox}")
        return "  ".join(parts)

    def __repr__(self) -> str:
        return f"Result({self.summary()})"
