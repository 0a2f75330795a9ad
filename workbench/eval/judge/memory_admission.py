"""Memory admission on a GPU: a large evaluation books what it will hold in a ledger the device's judges share and
waits, holding nothing, for room, so neither a verdict nor a float64 reference's placement depends on a neighbour's
memory (docs/verdicts.md, "Memory"). Small ones are not booked; the first in line always goes when nothing runs."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

#: An evaluation that may hold less than this share of the device is small: it is neither booked nor kept waiting.
LARGE_SHARE = 0.05
#: Share of the device's memory the bookings may add up to.
BUDGET_SHARE = 0.9
POLL_S = 0.2
_TICKETS = itertools.count()


def need_bytes(input_bytes: int, output_bytes: int | None, parameter_bytes: int | None) -> int:
    """What one evaluation may hold on the device at most: the inputs and outputs of the judge's rounds and timing
    sets and of the runners, the float64 copies, and the parameters in the judge and the reference's runner."""
    outputs = input_bytes if output_bytes is None else output_bytes
    return 5 * (input_bytes + outputs) + 3 * (parameter_bytes or 0)


def need_for(task: Any, size: dict[str, Any], device: str, reference: Callable[[], Any]) -> int:
    """`need_bytes` of `task` at `size` from its footprint, found without allocating; 0 (not booked) if it can't be."""
    from workbench.tasks.footprint import estimate_footprint

    found = estimate_footprint(task, size, device, reference())
    return 0 if found is None else need_bytes(found.input_bytes, found.output_bytes, found.parameter_bytes)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


class Ledger:
    """A device's bookings (ticket -> bytes, since, running) in `<device>.memory` under `flock`; dead ones dropped."""

    def __init__(self, folder: str, name: str, total_bytes: int):
        self.path = os.path.join(folder, name + ".memory")
        self.total = total_bytes

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                with open(self.path) as f:
                    entries = json.load(f)
            except (OSError, ValueError):
                entries = {}
            entries = {k: v for k, v in entries.items() if isinstance(v, dict) and _alive(int(k.split("-")[0]))}
            yield entries
            with open(self.path + ".tmp", "w") as f:
                json.dump(entries, f)
            os.replace(self.path + ".tmp", self.path)
        finally:
            os.close(fd)

    def large(self, need: int) -> bool:
        """Whether an evaluation needing `need` bytes is booked (a small one passes straight through)."""
        return need >= LARGE_SHARE * self.total

    def _admits(self, entries: dict[str, Any], ticket: str, need: int, since: float) -> bool:
        running = sum(e["bytes"] for k, e in entries.items() if e["running"] and k != ticket)
        ahead = sum(e["bytes"] for k, e in entries.items() if not e["running"] and e["since"] < since and k != ticket)
        return (running == 0 and ahead == 0) or running + ahead + need <= BUDGET_SHARE * self.total

    @contextlib.contextmanager
    def booked(self, need: int) -> Iterator[float]:
        """Book `need` bytes for the block once there is room (first come, first served); yields the seconds waited."""
        if not self.large(need):
            yield 0.0
            return
        ticket, since = f"{os.getpid()}-{next(_TICKETS)}", time.time()
        try:
            while True:
                with self._locked() as entries:
                    admitted = self._admits(entries, ticket, need, since)
                    entries[ticket] = {"bytes": need, "since": since, "running": admitted}
                if admitted:
                    break
                time.sleep(POLL_S)
            yield time.time() - since
        finally:
            with self._locked() as entries:
                entries.pop(ticket, None)
