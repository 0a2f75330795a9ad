"""The judge/runner protocol (docs/trust-boundary.md): `{"v", "kind", "job", "nonce", "seq", "body"}` frames; the runner
echoes the job id and nonce it got at spawn and numbers its messages 1, 2, 3, ...; anything else is a ProtocolError
(from a runner: `protocol-violation`). Runner messages carry data only."""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, field
from typing import Any

from workbench.eval.wire.records import Message, RecordError, from_json, to_json

PROTOCOL = (1, 4)
#: Exception names that mean the kernel did not compile (a Fault's stage is then "compile").
COMPILE_ERRORS = ("CompilationError", "CompileTimeAssertionFailure", "PTXASError", "UnsupportedLanguageConstruct")


class ProtocolError(Exception):
    """A message that breaks the protocol; from a runner this is a protocol violation, never a verdict."""


@dataclass(frozen=True)
class BufferInfo:
    """A shared buffer: id, size, and how to open it ("fd": a memfd sent alongside; "cuda-ipc": a handle in hex)."""

    buffer: int
    nbytes: int
    kind: str
    handle: str = ""
    device: int = 0


@dataclass(frozen=True)
class TensorRef:
    """A tensor inside a shared buffer: dtype, shape, strides and offset in elements."""

    buffer: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0


#: An argument: a tensor reference, or a JSON value passed as it is.
Arg = Any

@dataclass(frozen=True)
class Load(Message, kind="load"):
    source: str
    language: str
    entry: str
    device: str
    precision: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Share(Message, kind="share"):
    """New shared buffers; "fd" buffers come with one descriptor each, in order."""

    buffers: tuple[BufferInfo, ...]


@dataclass(frozen=True)
class Build(Message, kind="build"):
    """Build model `model` from `init` under `seed` where the reference was built (`init_device`), the module's size
    constants set first, then load the reference's `state` when its layout matches."""

    model: int
    init: tuple[Arg, ...]
    seed: int
    state: dict[str, TensorRef] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)
    init_device: str = ""


@dataclass(frozen=True)
class Call(Message, kind="call"):
    """Forward of `model` on `inputs` (the global RNG seeded first), output i copied into `slots[i]` when its form
    matches; `record`: reply with an OpRecord."""

    call: int
    model: int
    inputs: tuple[Arg, ...]
    slots: tuple[TensorRef, ...]
    poison: bool = True
    seed: int | None = None
    record: bool = False
    probe_ns: int = 0


@dataclass(frozen=True)
class Pool(Message, kind="pool"):
    """Register a timing pool once, so a Time message sends only the order inside the judge's clock."""

    pool: int
    input_sets: tuple[tuple[Arg, ...], ...]
    slots: tuple[TensorRef, ...] = ()


@dataclass(frozen=True)
class Time(Message, kind="time"):
    """A timed batch on registered `pool`: rep k runs set `order[k]` seeded with `seeds[k]`, output 0 copied to that
    set's slot; model NULL_MODEL or NULL_KERNEL: the null candidate."""

    call: int
    model: int
    pool: int
    order: tuple[int, ...]
    seeds: tuple[int, ...] = ()
    null_shape: tuple[int, ...] = ()
    null_dtype: str = ""


#: `Time.model` of the null candidate, and of the null candidate that launches one tiny kernel per call.
NULL_MODEL = 0
NULL_KERNEL = -1


@dataclass(frozen=True)
class Profile(Message, kind="profile"):
    call: int
    model: int
    inputs: tuple[Arg, ...]


@dataclass(frozen=True)
class Shutdown(Message, kind="shutdown"):
    """End the runner."""


@dataclass(frozen=True)
class Ping(Message, kind="ping"):
    """Answered with Pong once every earlier message was handled."""

    call: int


@dataclass(frozen=True)
class Pong(Message, kind="pong"):
    call: int


@dataclass(frozen=True)
class Compiling(Message, kind="compiling"):
    """A kernel starts compiling, or has (`done`: the runner waits for Proceed)."""

    done: bool


@dataclass(frozen=True)
class Proceed(Message, kind="proceed"):
    """The answer to Compiling(done=True): the judge holds the device again."""


@dataclass(frozen=True)
class Ready(Message, kind="ready"):
    protocol: tuple[int, int]
    pid: int
    versions: dict[str, str]
    device_name: str
    sandbox: str
    sandbox_reason: str = ""


@dataclass(frozen=True)
class Loaded(Message, kind="loaded"):
    kernels: tuple[str, ...]
    seconds: float
    build_dir: str = ""
    warmup_seconds: float = 0.0


@dataclass(frozen=True)
class Built(Message, kind="built"):
    model: int
    weights_loaded: bool
    init_note: str = ""


@dataclass(frozen=True)
class OutputForm:
    """What one output was: a plain tensor (dtype, shape, device), a tensor subclass, or another object."""

    type_name: str
    plain: bool
    dtype: str = ""
    shape: tuple[int, ...] = ()
    device: str = ""
    dense: bool = True
    copied: bool = False


@dataclass(frozen=True)
class LaunchReport:
    """The candidate's own Triton launches in one call (`runner/launches.py`), for the judge to corroborate."""

    launches: int
    kernels: tuple[str, ...]
    outputs_launched: bool
    outputs_prefilled_unchanged: bool = False
    threads_left: tuple[str, ...] = ()
    outputs_changed_after_launch: bool = False
    tampered: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpRecord:
    """What torch executed in one forward outside the candidate's launches (`runner/op_record.py`)."""

    ops: dict[str, int]
    exports: dict[str, int]
    launches: int
    complete: bool
    truncated: bool = False


@dataclass(frozen=True)
class Output(Message, kind="output"):
    call: int
    forms: tuple[OutputForm, ...]
    tuple_output: bool
    launch: LaunchReport
    seconds: float
    ops: OpRecord | None = None
    #: The configuration the candidate's autotuner chose so far (Helion), as text; "" when none.
    tuned: str = ""


@dataclass(frozen=True)
class Samples(Message, kind="samples"):
    """Per timed rep: ms on the current stream, and to the device-wide synchronize."""

    call: int
    stream_ms: tuple[float, ...]
    device_ms: tuple[float, ...]
    threads_left: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profiled(Message, kind="profiled"):
    """GPU kernel time per kernel name in one forward (us), and hook points found replaced."""

    call: int
    kernels: dict[str, float]
    tracer: str = ""
    tampered: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault(Message, kind="fault"):
    """The candidate raised (or could not be loaded): type name and text only, never a pickled exception."""

    stage: str
    exc_type: str
    message: str
    candidate_line: str = ""
    log: str = ""
    call: int = -1


_MESSAGES: dict[str, type[Message]] = {m.kind: m for m in (
    Load, Share, Build, Call, Pool, Time, Profile, Shutdown, Ping, Proceed, Ready, Loaded, Built, Output, Samples,
    Profiled, Pong, Compiling, Fault)}
JUDGE_KINDS = frozenset({"load", "share", "build", "call", "pool", "time", "profile", "shutdown", "ping", "proceed"})
RUNNER_KINDS = frozenset({"ready", "loaded", "built", "output", "samples", "profiled", "pong", "compiling", "fault"})
#: The records an `Arg` may hold, by the name they are tagged with (`records.py`).
_RECORDS = {cls.__name__: cls for cls in (BufferInfo, TensorRef, OutputForm, LaunchReport, OpRecord)}


def new_nonce() -> str:
    return secrets.token_hex(16)


def encode(message: Message, job: str, nonce: str, seq: int) -> dict[str, Any]:
    body = {f.name: to_json(getattr(message, f.name), tagged=True) for f in dataclasses.fields(message)}
    return {"v": list(PROTOCOL), "kind": message.kind, "job": job, "nonce": nonce, "seq": seq, "body": body}


def decode(frame: Any, *, job: str, nonce: str, seq: int, allowed: frozenset[str]) -> Message:
    """The message in `frame`, checked: version, kind among `allowed`, job and nonce, `seq`, fields (`records.py`)."""
    if not isinstance(frame, dict) or set(frame) != {"v", "kind", "job", "nonce", "seq", "body"}:
        raise ProtocolError("not a protocol frame")
    if not isinstance(frame["v"], list) or tuple(frame["v"]) != PROTOCOL:
        raise ProtocolError(f"protocol version {frame['v']!r}, expected {list(PROTOCOL)}")
    if not isinstance(frame["kind"], str) or frame["kind"] not in allowed:
        raise ProtocolError(f"unexpected message kind {frame['kind']!r:.80}")
    if frame["job"] != job or frame["nonce"] != nonce:
        raise ProtocolError("wrong job id or nonce")
    if frame["seq"] != seq:
        raise ProtocolError(f"sequence number {frame['seq']!r}, expected {seq} (replayed, skipped or reordered)")
    if not isinstance(frame["body"], dict):
        raise ProtocolError("body is not an object")
    cls = _MESSAGES[frame["kind"]]
    try:
        return from_json(cls, frame["body"], tagged=_RECORDS)
    except RecordError as exc:
        raise ProtocolError(str(exc)) from None
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. an unhashable record tag: malformed, not a crash
        raise ProtocolError(f"malformed {frame['kind']} body: {type(exc).__name__}") from None
