"""The judge/fork-server protocol: typed, versioned messages decoded strictly, like the runner's
(`runner_messages.py`), on the same length-prefixed transport.

Every message travels as `{"v", "kind", "body"}`. `decode` raises ProtocolError on another version, a kind the
receiver does not expect, or a body with unknown, missing or mistyped fields: a judge never acts on a reply it did
not ask for, and the fork server answers a request it cannot read with `Refused` instead of guessing.

judge -> fork server: Spawn (+ descriptors: the runner's socket, its log pipe), Wait, Exit.
fork server -> judge: Hello (once, when ready), Spawned, Status, Refused.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

PROTOCOL = (1, 0)

#: A bind into the sandbox: (host path, path inside).
Bind = tuple[str, str]


class ProtocolError(Exception):
    """A frame that is not a message of this protocol."""


@dataclass(frozen=True)
class Message:
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class Spawn(Message):
    """Fork one sandboxed runner for job `job` (nonce `nonce`) on `device`. `workdir`: the scratch directory the
    judge made for a runner without namespaces ("" with them)."""

    kind: ClassVar[str] = "spawn"
    job: str
    nonce: str
    device: str
    address_space: int | None = None
    cpu_seconds: int = 3600
    scratch_bytes: int = 1 << 30
    share_ipc: bool = False
    extra_binds: tuple[Bind, ...] = ()
    writable_binds: tuple[Bind, ...] = ()
    workdir: str = ""


@dataclass(frozen=True)
class Wait(Message):
    """The wait status of runner `pid` (its outer first child), once its channel has closed."""

    kind: ClassVar[str] = "wait"
    pid: int


@dataclass(frozen=True)
class Exit(Message):
    kind: ClassVar[str] = "exit"


@dataclass(frozen=True)
class Hello(Message):
    """The server is ready: which sandbox its runners get (`sandbox.probe()`), and why not where none."""

    kind: ClassVar[str] = "hello"
    sandbox: str
    reason: str
    pid: int


@dataclass(frozen=True)
class Spawned(Message):
    """`pid`: the outer process to signal and wait for; `inner_pid`: the runner itself (PID 1 of its namespace)."""

    kind: ClassVar[str] = "spawned"
    pid: int
    inner_pid: int
    sandbox: str
    reason: str = ""


@dataclass(frozen=True)
class Status(Message):
    """A runner's wait status (-1: unknown, it could not be collected in time)."""

    kind: ClassVar[str] = "status"
    pid: int
    status: int


@dataclass(frozen=True)
class Refused(Message):
    """The server could not read or serve a request."""

    kind: ClassVar[str] = "refused"
    reason: str


_MESSAGES: dict[str, type[Message]] = {m.kind: m for m in (Spawn, Wait, Exit, Hello, Spawned, Status, Refused)}
JUDGE_KINDS = frozenset({"spawn", "wait", "exit"})


def encode(message: Message) -> dict[str, Any]:
    body = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    return {"v": list(PROTOCOL), "kind": message.kind, "body": body}


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def _fits(value: Any, hint: Any) -> bool:
    """Does a decoded JSON value match a field's type (the few types these messages use)?"""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args, strict=True))
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)


def decode(frame: Any, allowed: frozenset[str]) -> Message:
    """The message in `frame`, checked: version, kind among `allowed`, body fields known, present and typed."""
    if not isinstance(frame, dict) or set(frame) != {"v", "kind", "body"}:
        raise ProtocolError("not a fork-server frame")
    if frame["v"] != list(PROTOCOL):
        raise ProtocolError(f"fork-server protocol version {frame['v']!r}, expected {list(PROTOCOL)}")
    kind = frame["kind"]
    if not isinstance(kind, str) or kind not in allowed:
        raise ProtocolError(f"unexpected fork-server message {kind!r}")
    body = frame["body"]
    if not isinstance(body, dict):
        raise ProtocolError("body is not an object")
    cls = _MESSAGES[kind]
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown fields {unknown}")
    values = {}
    for name, f in fields.items():
        if name not in body:
            if f.default is dataclasses.MISSING:
                raise ProtocolError(f"{cls.__name__}: missing field {name!r}")
            continue
        value = _as_tuples(body[name])
        if not _fits(value, hints[name]):
            raise ProtocolError(f"{cls.__name__}.{name}: {type(value).__name__} does not match {hints[name]}")
        values[name] = value
    return cls(**values)
