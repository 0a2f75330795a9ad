"""The caller/judge channel (docs/trust-boundary.md): one `{"v", "kind", "job", "body"}` JSON line per message. The
judge announces itself with `Ready`; the caller sends a `Job`; the judge answers with `Progress` lines (when asked)
and one `Reply`. Both ends are trusted; `decode_line` still checks everything (`records.py`), so a stray write or a
judge of another version is a `ChannelError`, never a reply read with defaults.
"""

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
    """The candidate as the judge gets it (`Candidate.to_spec()`): its source, language, entry class and name, and
    whether it is a declared PyTorch baseline."""

    source: str
    language: str
    entry: str = "ModelNew"
    name: str | None = None
    baseline: bool = False


@dataclass(frozen=True)
class Job:
    """One evaluation: `task` is `Task.to_spec()`, `size` the timing size, `check_sizes` the correctness sizes.
    Limits in seconds (`timeout` per step, `compile_timeout` for loading) and bytes (CPU address space; None: no
    cap). `reps`: fixed timed reps (None: until the CI target). `progress`: send Progress lines."""

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
    """Where one evaluation stands: stage ("startup" while a judge starts), step k of n where the stage counts,
    seconds since the job began, and for timing the samples so far and the 95% CI's relative width."""

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
    """What the judge decided about one candidate. `died`: how the runner (or the judge itself) died. `counted`:
    FLOPs and bytes of the reference. `ceilings`: measured roofline ceilings where no datasheet entry serves."""

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
    #: Median over timed rounds of reference / candidate (`judge/verdict.speedup`); None: not timed, or interpreted.
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    speedup_verdict: str | None = None
    speedup_basis: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: How the judge evaluated (runner, reference, timing, seconds and memory): `Result.protocol` is its dict.
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    telemetry: dict[str, Any] = field(default_factory=dict)
    #: What each verdict input rests on (`checks/evidence.py`): {"outputs", "time", "launches", "coverage"} -> level.
    evidence: dict[str, str] = field(default_factory=dict)
    counted: dict[str, Any] | None = None
    ceilings: dict[str, Any] | None = None


@dataclass(frozen=True)
class Ready:
    """The judge has imported its libraries and started its fork server; its first job may come."""

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
    """One message as one JSON line (NaN and infinities allowed: error figures may be either)."""
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
    """The message on `line`, checked (module doc): kind among `allowed`, for the job `job`."""
    got, message = _frame(line, allowed)
    if got != job:
        raise ChannelError(f"message for job {got!r} while job {job!r} is running")
    return message


def decode_job(line: bytes | str) -> tuple[str, Job]:
    """(job id, Job) of the caller's next line, checked like every other message."""
    job_id, message = _frame(line, frozenset({"job"}))
    assert isinstance(message, Job)
    return job_id, message
