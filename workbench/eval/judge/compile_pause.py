"""The judge's side of a runner's compile pause (`runner/compile_pause.py`): while the candidate's kernel compiles,
the judge lets go of its shared hold of the device, so another judge's timing can run; once the compile is over it
takes the device back (behind any timing that started meanwhile) and only then lets the runner go on.

The runner is untrusted, so the pause is bounded: a pause never gives up an exclusive hold (a measurement), at most
`MAX_PAUSES` pauses of one request let go of the device (an honest autotuner compiles one kernel per config; later
ones compile holding it), the compile stays inside the request's own deadline, and the seconds spent waiting to get
the device back are added to that deadline (they are the other judge's, not the candidate's). Anything out of order
(an end without a start, another message inside a pause) is a protocol violation.

A pause lets go only once the compile has run `GRACE_S` without ending. On one H100 with four judges, a kernel found
in the Triton cache loads in about 10 ms, a fresh Triton kernel compiles in about 0.15 s, and letting go for either,
then queueing behind other judges' timings to get the device back, cost 0.4-0.7 s a candidate; an nvcc build takes
tens of seconds and still lets go. Another judge's timing waits at most the grace.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.eval.judge.runners.process import RunnerProcess, RunnerViolation
from workbench.eval.wire import runner_messages as protocol

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


def reply(runner: RunnerProcess, kind: str, timeout: float, release: Callable[[], Any] | None,
          log: PauseLog) -> protocol.Message:
    """The runner's reply of `kind` (or a Fault) to the request just sent, answering its compile pauses on the way.
    `release()` is a context manager that lets go of the judge's shared hold for the block and takes it back after; what
    it yields says whether it let go (`let_go`) and how long taking the hold back took (`waited`), as
    `DeviceLock.released` does; None: no lock to let go of."""
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
