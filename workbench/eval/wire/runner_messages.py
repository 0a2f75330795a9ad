"""The judge/runner protocol (docs/trust-boundary.md): `{"v", "kind", "job", "nonce", "seq", "body"}` frames. The
runner echoes the job id and nonce it got at spawn and numbers its messages 1, 2, 3, ...; `decode` raises
ProtocolError on anything else, which from a runner is `protocol-violation`. Runner messages carry data only.

judge -> runner: Load, Share, Build, Call, Pool, Time, Profile, Ping, Proceed, Shutdown.
runner -> judge: Ready, Loaded, Built, Output, Samples, Profiled, Pong, Compiling, Fault.
"""

from __future__ import annotations

import dataclasses
import secrets
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

PROTOCOL = (1, 2)


class ProtocolError(Exception):
    """A message that breaks the protocol; from a runner this is a protocol violation, never a verdict."""


# ---- shared-memory references -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BufferInfo:
    """A shared buffer: its id, size, and how to open it ("fd": a memfd passed alongside the message; "cuda-ipc":
    a CUDA IPC handle in hex)."""

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


#: An argument: a tensor reference, or a JSON value (numbers, strings, nested lists) passed as it is.
Arg = Any


# ---- messages -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Message:
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class Load(Message):
    kind: ClassVar[str] = "load"
    source: str
    language: str
    entry: str
    device: str
    precision: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Share(Message):
    """New shared buffers; "fd" buffers come with one descriptor each, in order."""

    kind: ClassVar[str] = "share"
    buffers: tuple[BufferInfo, ...]


@dataclass(frozen=True)
class Build(Message):
    """Build model `model` from `init` under `seed`, then load the reference's `state` when keys and shapes match.
    `sizes`: this build's size constants, set on the candidate's module first. `init_device`: where the reference
    was built, so where the candidate is built first (`model_init`; "": the runner's default)."""

    kind: ClassVar[str] = "build"
    model: int
    init: tuple[Arg, ...]
    seed: int
    state: dict[str, TensorRef] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)
    init_device: str = ""


@dataclass(frozen=True)
class Call(Message):
    """Run forward of `model` on `inputs`, output i copied into `slots[i]` when its form matches. `seed`: seeds the
    global RNG right before forward, as for the reference. `record`: reply with an OpRecord."""

    kind: ClassVar[str] = "call"
    call: int
    model: int
    inputs: tuple[Arg, ...]
    slots: tuple[TensorRef, ...]
    poison: bool = True
    seed: int | None = None
    record: bool = False
    #: A probe call (CPU): every interpreted launch burns this many ns of CPU (`checks/evidence.py`); 0: ordinary.
    probe_ns: int = 0


@dataclass(frozen=True)
class Pool(Message):
    """Register the timing pool once (set k is `input_sets[k]`, its slot `slots[k]`), so a Time message sends only
    the order, not every reference again inside the judge's clock."""

    kind: ClassVar[str] = "pool"
    pool: int
    input_sets: tuple[tuple[Arg, ...], ...]
    slots: tuple[TensorRef, ...] = ()


@dataclass(frozen=True)
class Time(Message):
    """A timed batch: rep k runs input set `order[k]`, seeded with `seeds[k]`, output 0 then copied to `commit[k]`.
    `model` NULL_MODEL or NULL_KERNEL: the null candidate, returning a `null_shape` / `null_dtype` tensor."""

    kind: ClassVar[str] = "time"
    call: int
    model: int
    input_sets: tuple[tuple[Arg, ...], ...]
    order: tuple[int, ...]
    warmup: int
    commit: tuple[TensorRef | None, ...] = ()
    flush_l2: bool = True
    seeds: tuple[int, ...] = ()
    null_shape: tuple[int, ...] = ()
    null_dtype: str = ""
    #: A registered Pool: output k goes to the slot of set order[k] (`input_sets` and `commit` are then empty).
    pool: int = 0


#: `Time.model` of the null candidate, and of the null candidate that launches one tiny kernel per call.
NULL_MODEL = 0
NULL_KERNEL = -1


@dataclass(frozen=True)
class Profile(Message):
    kind: ClassVar[str] = "profile"
    call: int
    model: int
    inputs: tuple[Arg, ...]


@dataclass(frozen=True)
class Shutdown(Message):
    kind: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class Ping(Message):
    """Answered at once with Pong: the judge knows every earlier message (shared buffers included) was handled."""

    kind: ClassVar[str] = "ping"
    call: int


@dataclass(frozen=True)
class Pong(Message):
    kind: ClassVar[str] = "pong"
    call: int


@dataclass(frozen=True)
class Compiling(Message):
    """A kernel starts compiling (`done` False) or has compiled (True: the runner waits for Proceed;
    `runner/compile_pause.py`)."""

    kind: ClassVar[str] = "compiling"
    done: bool


@dataclass(frozen=True)
class Proceed(Message):
    """The answer to Compiling(done=True): the judge holds the device again, the runner may go on."""

    kind: ClassVar[str] = "proceed"


@dataclass(frozen=True)
class Ready(Message):
    kind: ClassVar[str] = "ready"
    protocol: tuple[int, int]
    pid: int
    versions: dict[str, str]
    device_name: str
    sandbox: str
    sandbox_reason: str = ""


@dataclass(frozen=True)
class Loaded(Message):
    """`warmup_seconds`: what loading the GPU libraries took (`runner/library_warmup.py`)."""

    kind: ClassVar[str] = "loaded"
    kernels: tuple[str, ...]
    seconds: float
    build_dir: str = ""
    warmup_seconds: float = 0.0


@dataclass(frozen=True)
class Built(Message):
    """`init_note`: why the candidate was built on the host instead of where the Build asked ("" when it was not)."""

    kind: ClassVar[str] = "built"
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
    """The candidate's own Triton launches in one call (`runner/launches.py`): count, kernels, whether outputs were
    launched on or (CPU) hold content no launch produced, hook points found replaced. The judge corroborates it."""

    launches: int
    kernels: tuple[str, ...]
    outputs_launched: bool
    outputs_prefilled_unchanged: bool = False
    threads_left: tuple[str, ...] = ()
    outputs_changed_after_launch: bool = False
    tampered: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpRecord:
    """What torch executed in one forward outside the candidate's launches (`runner/op_record.py`): operator -> runs,
    export -> elements, launches counted, `complete` to the end of forward, `truncated` past the name cap."""

    ops: dict[str, int]
    exports: dict[str, int]
    launches: int
    complete: bool
    truncated: bool = False


@dataclass(frozen=True)
class Output(Message):
    kind: ClassVar[str] = "output"
    call: int
    forms: tuple[OutputForm, ...]
    tuple_output: bool
    launch: LaunchReport
    seconds: float
    #: Present when the Call asked for a record.
    ops: OpRecord | None = None


@dataclass(frozen=True)
class Samples(Message):
    """Per timed rep: ms between the events on the current stream, and to the device-wide synchronize."""

    kind: ClassVar[str] = "samples"
    call: int
    stream_ms: tuple[float, ...]
    device_ms: tuple[float, ...]
    threads_left: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profiled(Message):
    """GPU kernel time per kernel name in one forward (us), and hook points found replaced (`runner/seal.py`)."""

    kind: ClassVar[str] = "profiled"
    call: int
    kernels: dict[str, float]
    #: How the runner recorded them: "cupti" (the activity API directly) or "torch-profiler".
    tracer: str = ""
    tampered: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault(Message):
    """The candidate raised (or could not be loaded): type name and text only, never a pickled exception."""

    kind: ClassVar[str] = "fault"
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
_NESTED = {"BufferInfo": BufferInfo, "TensorRef": TensorRef, "OutputForm": OutputForm, "LaunchReport": LaunchReport,
           "OpRecord": OpRecord}


def new_nonce() -> str:
    return secrets.token_hex(16)


# ---- encoding -----------------------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"@": type(value).__name__, **{f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def encode(message: Message, job: str, nonce: str, seq: int) -> dict[str, Any]:
    body = {f.name: _plain(getattr(message, f.name)) for f in dataclasses.fields(message)}
    return {"v": list(PROTOCOL), "kind": message.kind, "job": job, "nonce": nonce, "seq": seq, "body": body}


def _revive(value: Any) -> Any:
    """Nested records come back as their dataclasses; anything tagged with an unknown name is an error."""
    if isinstance(value, dict):
        tag = value.get("@")
        if tag is not None:
            cls = _NESTED.get(tag)
            if cls is None:
                raise ProtocolError(f"unknown record type {tag!r}")
            return _build(cls, {k: v for k, v in value.items() if k != "@"})
        return {k: _revive(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_revive(v) for v in value)
    return value


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin is typing.Union or origin is types.UnionType:
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (tuple, list):
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_type_ok(v, args[0]) for v in value)
        return len(args) == len(value) and all(_type_ok(v, a) for v, a in zip(value, args, strict=True))
    if origin is dict:
        kt, vt = typing.get_args(hint)
        return isinstance(value, dict) and all(_type_ok(k, kt) and _type_ok(v, vt) for k, v in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


_SCHEMAS: dict[type, tuple[dict[str, Any], tuple[dataclasses.Field, ...], frozenset[str]]] = {}


def _schema(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field, ...], frozenset[str]]:
    """Type hints and fields of a message class, resolved once (resolving compiles strings: slow per message)."""
    if cls not in _SCHEMAS:
        fields = dataclasses.fields(cls)
        _SCHEMAS[cls] = (typing.get_type_hints(cls), fields, frozenset(f.name for f in fields))
    return _SCHEMAS[cls]


def _build(cls: type, body: dict[str, Any]) -> Any:
    hints, fields, names = _schema(cls)
    unknown = set(body) - names
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    values = {}
    for f in fields:
        if f.name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"{cls.__name__}: missing field {f.name!r}")
            continue
        value = _revive(body[f.name])
        if isinstance(value, int) and not isinstance(value, bool) and hints[f.name] is float:
            value = float(value)
        if not _type_ok(value, hints[f.name]):
            raise ProtocolError(f"{cls.__name__}.{f.name}: {type(value).__name__} does not match {hints[f.name]}")
        values[f.name] = value
    return cls(**values)


def decode(frame: Any, *, job: str, nonce: str, seq: int, allowed: frozenset[str]) -> Message:
    """The message in `frame`, checked: version, kind among `allowed`, job and nonce, sequence number `seq`."""
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
    try:
        return _build(_MESSAGES[frame["kind"]], frame["body"])
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. an unhashable record tag: malformed, not a crash
        raise ProtocolError(f"malformed {frame['kind']} body: {type(exc).__name__}") from None
