"""The device lock all judges of a machine share (a per-device `flock`): timing exclusive, other uses shared, a waiting
writer gating new readers; runners never see it. A compile pause (`reply_through_pauses`) lets go of a shared hold,
never an exclusive one, past `GRACE_S`: `MAX_PAUSES` a request, in its deadline; anything else is a violation."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from workbench.eval.judge.runners.process import RunnerProcess, RunnerViolation
from workbench.eval.wire import runner_messages as protocol

#: The modes a stage may need, weakest first.
NONE, SHARED, EXCLUSIVE = 0, 1, 2


def device_identity(device: str) -> str:
    """What judges of one device agree on: the GPU's UUID (whatever CUDA_VISIBLE_DEVICES makes its index), or host."""
    if device.startswith("cuda"):
        try:
            import torch

            index = torch.device(device).index or 0
            return "gpu-" + str(torch.cuda.get_device_properties(index).uuid)
        except Exception:  # noqa: BLE001 - older torch or no device: the index names it
            return "gpu-" + os.environ.get("CUDA_VISIBLE_DEVICES", "") + "-" + device
    return "cpu-" + socket.gethostname()


@dataclass
class Released:
    """What `DeviceLock.released` yields: whether the hold was let go of, and the seconds taking it back took."""

    let_go: bool = False
    waited: float = 0.0


class DeviceLock:
    """Shared/exclusive, re-entrant in one judge: asking for more than is held lets go, waits, and goes back after."""

    def __init__(self, device: str, folder: str | None = None, name: str | None = None):
        self.device = device
        self.folder = folder or os.path.join(tempfile.gettempdir(), f"kwb-device-locks-{os.getuid()}")
        self.name = name or device_identity(device).replace(os.sep, "_")
        self._lock_fd: int | None = None
        self._gate_fd: int | None = None
        self._held: list[int] = []

    def _open(self) -> None:
        if self._lock_fd is not None:
            return
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._lock_fd = os.open(os.path.join(self.folder, self.name + ".lock"), flags, 0o600)
        self._gate_fd = os.open(os.path.join(self.folder, self.name + ".gate"), flags, 0o600)

    def companion(self) -> DeviceLock:
        """A lock of this device with its own file descriptions: `flock` treats a background thread as another judge."""
        return DeviceLock(self.device, self.folder, self.name)

    @property
    def mode(self) -> int:
        return max(self._held, default=NONE)

    def _take(self, mode: int) -> None:
        assert self._lock_fd is not None and self._gate_fd is not None
        fcntl.flock(self._gate_fd, fcntl.LOCK_EX)  # behind any writer already waiting
        try:  # a writer waits here holding the gate: no new reader gets past meanwhile
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX if mode == EXCLUSIVE else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate_fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def hold(self, mode: int) -> Iterator[float]:
        """Hold the lock in `mode` (NONE: not at all) for the block; yields the seconds spent waiting for it."""
        before, waited = self.mode, 0.0
        if mode > before:  # else a nested hold asking for no more than is held: straight through
            self._open()
            assert self._lock_fd is not None
            started = time.perf_counter()
            if before != NONE:
                # Up from shared: let go first. Two judges converting at once would otherwise deadlock (each holding
                # its shared lock while waiting, behind the other, for the exclusive one).
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            self._take(mode)
            waited = time.perf_counter() - started
        self._held.append(mode)
        try:
            yield waited
        finally:
            self._held.pop()
            if mode > before:
                assert self._lock_fd is not None
                # Back down without the gate: neither a writer waiting at it nor this holder waits for the other.
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN if before == NONE else fcntl.LOCK_SH)

    @contextlib.contextmanager
    def released(self) -> Iterator[Released]:
        """A shared hold let go for the block (compiling needs no device), retaken behind waiting writers (`waited`)."""
        if self.mode != SHARED or self._lock_fd is None:
            yield Released()
            return
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        got = Released(let_go=True)
        try:
            yield got
        finally:
            started = time.perf_counter()
            self._take(SHARED)
            got.waited = time.perf_counter() - started

    def close(self) -> None:
        for fd in (self._lock_fd, self._gate_fd):
            if fd is not None:
                os.close(fd)
        self._lock_fd = self._gate_fd = None
        self._held.clear()


def held(lock: DeviceLock | None, mode: int) -> contextlib.AbstractContextManager[float]:
    """`lock.hold(mode)`, or a block that waited 0 s where there is no lock (a judge alone on its device)."""
    return lock.hold(mode) if lock is not None else contextlib.nullcontext(0.0)


#: Pauses of one request that let go of the device.
MAX_PAUSES = 64
#: Seconds a compile runs holding the device before its pause lets go (module doc).
GRACE_S = 0.25


@dataclass
class PauseLog:
    """What the pauses of one candidate's requests came to (protocol `compile_pauses` in the Result)."""

    #: Pauses the runner asked for, and those that let go of the device.
    count: int = 0
    released: int = 0
    #: Seconds the candidate compiled without holding the device, and seconds spent getting the device back.
    compiling_s: float = 0.0
    waited_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "released": self.released, "compiling_s": round(self.compiling_s, 3),
                "waited_s": round(self.waited_s, 3)}


def reply_through_pauses(runner: RunnerProcess, kind: str, timeout: float, release: Callable[[], Any] | None,
          log: PauseLog) -> protocol.Message:
    """The runner's reply of `kind` (or a Fault), answering its compile pauses with `release()` (None: no lock)."""
    deadline = time.monotonic() + timeout
    pauses = 0
    while True:
        message = runner.receive({kind, "compiling"}, deadline)
        if not isinstance(message, protocol.Compiling):
            return message
        if message.done:
            raise RunnerViolation("the runner ended a compile pause it never started", runner.log_tail())
        pauses += 1
        log.count += 1
        started = time.monotonic()
        quick = runner.answers_within(min(GRACE_S, max(0.0, deadline - started)))
        let_go = release is not None and pauses <= MAX_PAUSES and not quick
        with release() if let_go else contextlib.nullcontext() as held:
            end = runner.receive({"compiling"}, deadline)
            if not (isinstance(end, protocol.Compiling) and end.done):
                raise RunnerViolation(f"the runner sent {end.kind!r} inside a compile pause", runner.log_tail())
            log.compiling_s += time.monotonic() - started
        if getattr(held, "let_go", False):
            log.released += 1
            log.waited_s += held.waited
            deadline += held.waited
        runner.send(protocol.Proceed())
