"""The caller's side of live progress: the judge's `Progress` handed to `on_progress`, repeated once a second with
its elapsed time advanced while the judge is silent (a long compile), and a cancel token checked while waiting.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Protocol

from workbench.eval.wire.judge_messages import Progress

#: Seconds between repeats of the latest progress while the judge is silent.
TICK_SECONDS = 1.0


class CancelToken(Protocol):
    """Anything with `is_set()`: a `threading.Event` is the usual one (the editor widget's Cancel sets it)."""

    def is_set(self) -> bool: ...


class Cancelled(Exception):
    """The caller's cancel token was set while an evaluation ran; its judge was ended with it."""


class ProgressRelay:
    """Calls `on_progress(Progress)` for each message of the judge, and once a second while it is silent."""

    def __init__(self, on_progress: Callable[[Progress], Any] | None, cancel: CancelToken | None = None):
        self.on_progress, self.cancel = on_progress, cancel
        self.latest: Progress | None = None
        self._received = self._emitted = time.monotonic()

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()

    def deliver(self, message: Progress) -> None:
        self.latest, self._received = message, time.monotonic()
        self._emit(message)

    def waiting(self, stage: str = "") -> None:
        """Called while the caller waits (about every 0.2 s): raises Cancelled when asked to stop, repeats the
        latest progress (or `stage`, before the judge said anything) once a second."""
        self.check_cancel()
        now = time.monotonic()
        if self.on_progress is None or now - self._emitted < TICK_SECONDS:
            return
        if self.latest is not None:
            self._emit(dataclasses.replace(self.latest, elapsed=round(self.latest.elapsed + now - self._received, 3)))
        elif stage:
            self._emit(Progress(stage=stage, elapsed=round(now - self._received, 3)))

    def _emit(self, message: Progress) -> None:
        self._emitted = time.monotonic()
        if self.on_progress is not None:
            self.on_progress(message)
