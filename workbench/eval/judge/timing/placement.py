"""Where the two sides of a timed round run: the candidate's runner frozen while the reference is timed (`Frozen`),
and the judge's timing thread and both runners on one core for the whole timing (`OneCore`)."""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any

from workbench.eval.judge.runners.session import CandidateSession


class Frozen:
    """The candidate's runner stopped (SIGSTOP) for the block."""

    def __init__(self, session: CandidateSession):
        self.session = session

    def __enter__(self) -> None:
        self.session.runner.freeze()

    def __exit__(self, *exc: Any) -> None:
        self.session.runner.thaw()


def pin_gpu_timing() -> bool:
    """Whether GPU timing pins the timed processes to one core too (`KWB_TIMING_PIN=0`: no)."""
    return os.environ.get("KWB_TIMING_PIN", "1").strip() != "0"


class OneCore:
    """The judge's timing thread and every thread of both runners on one core (the sides take turns, so it costs
    nothing, and both see the same caches and clock); a thread the candidate moves off it is put back (`escaped`)."""

    def __init__(self, session: CandidateSession, cuda: bool, reference_runner: Any = None):
        self.session, self.cuda = session, cuda
        self.active = hasattr(os, "sched_setaffinity") and (not cuda or pin_gpu_timing())
        self.reference_runner = reference_runner
        self.saved: set[int] | None = None
        self.core: set[int] = set()

    def __enter__(self) -> None:
        if not self.active:
            return
        with suppress(OSError):  # not permitted here: time unpinned
            self.saved = os.sched_getaffinity(0)
            # On a GPU the last core: the first one takes more of the machine's interrupts.
            core = self.core = {max(self.saved) if self.cuda else min(self.saved)}
            os.sched_setaffinity(0, core)
            members = self.session.runner.members()
            if self.reference_runner is not None:
                members += self.reference_runner.members()
            for pid in members:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    os.sched_setaffinity(int(tid), core)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            with suppress(OSError):
                os.sched_setaffinity(0, self.saved)

    def escaped(self) -> list[str]:
        """Threads of the candidate's runner the candidate moved off the timing core, each put back."""
        if not self.core:
            return []
        moved = []
        for pid in self.session.runner.members():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                with suppress(OSError):  # the thread ended meanwhile
                    if os.sched_getaffinity(int(tid)) != self.core:
                        moved.append(tid)
                        os.sched_setaffinity(int(tid), self.core)
        return moved
