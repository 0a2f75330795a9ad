"""How a provider call survives its provider: the retry policy and the ticket that cancels a call in flight.

The SDKs' own retries are switched off (`max_retries=0` on their clients) so that one policy decides for every
provider: how many attempts, how long to wait between them (exponential backoff with jitter, or what the
server's Retry-After asks for), and when waiting is pointless (a server asking for an hour). Waiting happens on
the call's `CallControl`, so Stop in the PromptPanel or Ctrl-C in `kwb agent` ends a backoff at once.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from workbench.llm.errors import LLMConfigError


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and waits for one LLM call.

    `max_retries` more attempts after the first (so `max_retries + 1` in all) for failures that can pass:
    rate limits, server errors, timeouts, dropped connections. The wait before retry k (1-based) is
    `base_delay * 2**(k-1)` capped at `max_delay`, drawn uniformly from its upper half (jitter, so clients that
    failed together do not come back together), or the server's Retry-After when it asks for longer. A
    Retry-After beyond `max_retry_after` ends the call at once: sleeping an hour inside a loop helps nobody.
    """

    max_retries: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise LLMConfigError(f"max_retries must be 0 or more, got {self.max_retries}", setting="max_retries")
        if self.base_delay < 0 or self.max_delay < 0:
            raise LLMConfigError("retry delays must be 0 or more seconds", setting="retry_base_delay")

    @property
    def attempts(self) -> int:
        return self.max_retries + 1

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before retry number `retry` (1-based); None when the server asks for too long."""
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        draw = (rng or random).uniform(0.5, 1.0) * backoff
        if retry_after is not None:
            # Retry-After is a minimum; a little spread keeps concurrent callers from returning in lockstep.
            return max(draw, retry_after * (rng or random).uniform(1.0, 1.1))
        return draw


class CallCancelled(Exception):
    """Raised inside a provider call whose ticket was cancelled (Stop, Ctrl-C, a run that ended)."""


class CallControl:
    """A ticket for one call in flight: the caller may cancel it, the call settles it when its reply is in.

    Exactly one of `cancel()` and `settle()` wins (both say whether they did), so a reply that arrives while
    the run is being stopped is recorded either as the reply or as the cancellation, never as both.
    """

    def __init__(self, parent: threading.Event | None = None):
        self._event = threading.Event()
        self._parent = parent
        self._lock = threading.Lock()
        self._settled = False
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or (self._parent is not None and self._parent.is_set())

    def cancel(self, reason: str = "cancelled") -> bool:
        """Cancel the call; False when its reply had already settled it."""
        with self._lock:
            if self._settled:
                return False
            if not self._event.is_set():
                self.reason = reason
            self._event.set()
            return True

    def settle(self) -> bool:
        """Claim the reply for the caller; False when the call was cancelled first."""
        with self._lock:
            if self.cancelled:
                return False
            self._settled = True
            return True

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when cancelled; True if cancelled."""
        deadline = time.monotonic() + seconds
        while not self.cancelled:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._event.wait(min(0.05, left))  # short steps: a parent event (the run's Stop) is polled too
        return True

    def check(self) -> None:
        if self.cancelled:
            raise CallCancelled(self.reason or "cancelled")
