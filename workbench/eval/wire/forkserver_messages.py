"""The judge/fork-server protocol: `{"v", "kind", "body"}` frames in the strict record codec (`records.py`); the server
answers what it cannot read with `Refused`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.eval.wire.records import Message, RecordError, from_json, to_json

PROTOCOL = (1, 0)

#: A bind into the sandbox: (host path, path inside).
Bind = tuple[str, str]


class ProtocolError(Exception):
    """A frame that is not a message of this protocol."""


@dataclass(frozen=True)
class Spawn(Message, kind="spawn"):
    """Fork one sandboxed runner; `workdir`: the judge's scratch directory for a runner without namespaces."""

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
    warm: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wait(Message, kind="wait"):
    """The wait status of runner `pid` (its outer first child)."""

    pid: int


@dataclass(frozen=True)
class Exit(Message, kind="exit"):
    """End the fork server."""


@dataclass(frozen=True)
class Hello(Message, kind="hello"):
    """The server is ready: which sandbox its runners get, and why not where none."""

    sandbox: str
    reason: str
    pid: int


@dataclass(frozen=True)
class Spawned(Message, kind="spawned"):
    """`pid`: the outer process to signal and wait for; `inner_pid`: the runner itself (PID 1 of its namespace)."""

    pid: int
    inner_pid: int
    sandbox: str
    reason: str = ""


@dataclass(frozen=True)
class Status(Message, kind="status"):
    """A runner's wait status (-1: unknown)."""

    pid: int
    status: int


@dataclass(frozen=True)
class Refused(Message, kind="refused"):
    reason: str


_MESSAGES: dict[str, type[Message]] = {m.kind: m for m in (Spawn, Wait, Exit, Hello, Spawned, Status, Refused)}
JUDGE_KINDS = frozenset({"spawn", "wait", "exit"})


def encode(message: Message) -> dict[str, Any]:
    return {"v": list(PROTOCOL), "kind": message.kind, "body": to_json(message)}


def decode(frame: Any, allowed: frozenset[str]) -> Message:
    """The message in `frame`, checked: version, kind among `allowed`, body."""
    if not isinstance(frame, dict) or set(frame) != {"v", "kind", "body"}:
        raise ProtocolError("not a fork-server frame")
    if frame["v"] != list(PROTOCOL):
        raise ProtocolError(f"fork-server protocol version {frame['v']!r:.40}, expected {list(PROTOCOL)}")
    kind = frame["kind"]
    if not isinstance(kind, str) or kind not in allowed:
        raise ProtocolError(f"unexpected fork-server message {kind!r:.80}")
    try:
        return from_json(_MESSAGES[kind], frame["body"])
    except RecordError as exc:
        raise ProtocolError(str(exc)) from None
