"""Live progress: `ctx.progress(stage, **fields)` from anywhere in an evaluation, cheap and never raising; a new stage
is sent at once, further calls within a stage at most every `min_interval` seconds. Never inside a timed bracket."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workbench.eval.wire.judge_messages import Progress

#: Least seconds between two progress messages of the same stage.
MIN_INTERVAL = 0.25


class ProgressHook:
    """Sends `Progress` messages for the job in hand through `send`."""

    def __init__(self, min_interval: float = MIN_INTERVAL):
        self.min_interval = min_interval
        self._send: Callable[[Progress], None] | None = None
        self._started, self._stage, self._last = 0.0, "", 0.0

    def start(self, send: Callable[[Progress], None] | None) -> None:
        """Begin a job; `send` None makes every call a no-op."""
        self._send, self._started, self._stage, self._last = send, time.monotonic(), "", 0.0

    def stop(self) -> None:
        self._send = None

    def __call__(self, stage: str, **fields: Any) -> None:
        """Report `stage` with Progress's optional fields."""
        if self._send is None:
            return
        now = time.monotonic()
        if stage == self._stage and now - self._last < self.min_interval:
            return
        try:
            message = Progress(stage=stage, elapsed=round(now - self._started, 3), **fields)
        except TypeError as exc:  # a call with a field Progress does not have is the judge's bug: say which
            message = Progress(stage=stage, elapsed=round(now - self._started, 3), note=f"bad progress call: {exc}")
        self._stage, self._last = stage, now
        try:
            self._send(message)
        except (OSError, ValueError):  # the caller is gone; the reply write will notice
            self._send = None
