"""The caller/judge channel: one `{"v", "kind", "job", "body"}` JSON line per message (the judge's `Ready`, the caller's
`Job`, the judge's `Progress` lines and one `Reply`), checked strictly (`records.py`), so a stray write or a judge of
another version is a `ChannelError`, never a reply read with defaults."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any, ClassVar

from workbench.eval.wire.diagnostics import Diagnostics
from workbench.eval.wire.records import RecordError, from_json, to_json
from workbench.result import Timing

CHANNEL_VERSION = (2, 0)


class ChannelError(Exception):
    """A line on the caller/judge channel that is not the message expected there."""


@dataclass(frozen=True)
class CandidateSpec:
    """The candidate as the judge gets it (`Candidate.to_spec()`)."""

    source: str
    language: str
    entry: str = "ModelNew"
    name: str | None = None
    baseline: bool = False


@dataclass(frozen=True)
class Job:
    """One evaluation: `task` is `Task.to_spec()`, `size` the timing size, `check_sizes` the correctness sizes;
    `memory_bytes` caps a CPU runner's address space; `reps` fixes the timed reps."""

    kind: ClassVar[str] = "job"
    task: dict[str, Any]
    candidate: CandidateSpec
    device: str
    size: dict[str, Any]
    check_sizes: tuple[dict[str, Any], ...]
    timeout: float
    compile_timeout: float
    memory_bytes: int | None = None
    seed: int = 0
    rounds: int = 5
    time_it: bool = True
    compile_reference: bool = True
    reps: int | None = None
    progress: bool = False


@dataclass(frozen=True)
class Progress:
    """Where one evaluation stands: stage, step k of n, seconds since the job began, samples and CI width."""

    kind: ClassVar[str] = "progress"
    stage: str
    elapsed: float
    step: int = 0
    steps: int = 0
    samples: int = 0
    ci_width: float | None = None
    note: str = ""

    def describe(self) -> str:
        """One short line for a status bar: "time · batch 3 of 8 · 412 samples · CI ±4.1% · 12.3 s"."""
        parts = [self.stage]
        if self.steps:
            unit = {"check": "round", "time": "batch"}.get(self.stage, "step")
            parts.append(f"{unit} {self.step} of {self.steps}")
        elif self.step:
            parts.append(f"step {self.step}")
        if self.samples:
            parts.append(f"{self.samples} samples")
        if self.ci_width is not None:
            parts.append(f"CI ±{50 * self.ci_width:.1f}%")
        if self.note:
            parts.append(self.note)
        parts.append(f"{self.elapsed:.1f} s")
        return " · ".join(parts)


@dataclass(frozen=True)
class Reply:
    """What the judge decided about one candidate (`died`: how the runner died; `counted`: the reference's FLOPs and
    bytes; `ceilings`: measured roofline ceilings)."""

    kind: ClassVar[str] = "reply"
    status: str
    message: str = ""
    flags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    log: str = ""
    died: str = ""
    judge_pid: int = 0
    device_name: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    sandbox: str = ""
    sandbox_reason: str = ""
    kernel_policy: str = ""
    precision: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    error_budget: dict[str, Any] = field(default_factory=dict)
    timing: Timing | None = None
    reference_timing: Timing | None = None
    compiled_reference_timing: Timing | None = None
    judge_clock_timing: Timing | None = None
    coverage: float | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    speedup_verdict: str | None = None
    speedup_basis: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    telemetry: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    counted: dict[str, Any] | None = None
    ceilings: dict[str, Any] | None = None


@dataclass(frozen=True)
class Ready:
    """The judge is ready for its first job."""

    kind: ClassVar[str] = "ready"
    pid: int
    versions: dict[str, str]
    sandbox: str
    sandbox_reason: str = ""
    transport: str = ""
    transport_note: str = ""


_KINDS: dict[str, type] = {m.kind: m for m in (Job, Progress, Reply, Ready)}


def new_job_id() -> str:
    return secrets.token_hex(8)


def encode_line(message: Job | Progress | Reply | Ready, job: str) -> bytes:
    """One message as one JSON line (NaN and infinities allowed)."""
    frame = {"v": list(CHANNEL_VERSION), "kind": message.kind, "job": job, "body": to_json(message)}
    return (json.dumps(frame, separators=(",", ":")) + "\n").encode()


def _frame(line: bytes | str, allowed: frozenset[str]) -> tuple[str, Job | Progress | Reply | Ready]:
    try:
        frame = json.loads(line)
    except ValueError:
        raise ChannelError(f"not a JSON line: {line[:120]!r}") from None
    if not isinstance(frame, dict) or set(frame) != {"v", "kind", "job", "body"} or not isinstance(frame["job"], str):
        raise ChannelError(f"not a channel frame: {str(frame)[:120]}")
    if frame["v"] != list(CHANNEL_VERSION):
        raise ChannelError(f"channel version {frame['v']!r}, expected {list(CHANNEL_VERSION)}: the judge and the "
                           "caller come from different versions of the package")
    if frame["kind"] not in allowed:
        raise ChannelError(f"unexpected message kind {frame['kind']!r} (expected {' or '.join(sorted(allowed))})")
    try:
        return frame["job"], from_json(_KINDS[frame["kind"]], frame["body"])
    except RecordError as exc:
        raise ChannelError(str(exc)) from None


def decode_line(line: bytes | str, *, job: str, allowed: frozenset[str]) -> Job | Progress | Reply | Ready:
    """The message on `line`, checked: kind among `allowed`, for the job `job`."""
    got, message = _frame(line, allowed)
    if got != job:
        raise ChannelError(f"message for job {got!r} while job {job!r} is running")
    return message


def decode_job(line: bytes | str) -> tuple[str, Job]:
    """(job id, Job) of the caller's next line."""
    job_id, message = _frame(line, frozenset({"job"}))
    assert isinstance(message, Job)
    return job_id, message
