"""Background jobs for widgets: evaluation off the UI thread, progress ticks, cancellation.

Evaluation already runs in an isolated worker process; the thread here only waits for it so the notebook
stays responsive. Callbacks are handed back to the kernel's main thread (its IOLoop) when there is one:
widget updates and store writes (SQLite connections are bound to their thread) then happen where the
rest of the notebook runs. Without a kernel (tests, scripts) callbacks run in the job's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def _kernel_loop() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with ipywidgets
        return None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    return getattr(kernel, "io_loop", None)


def call_on_main(fn: Callable[[], Any]) -> bool:
    """Run `fn` on the kernel's main thread (soon), or right here when there is no kernel loop.

    Returns True when `fn` already ran.
    """
    loop = _kernel_loop() if threading.current_thread() is not threading.main_thread() else None
    if loop is None:
        fn()
        return True
    loop.add_callback(fn)
    return False


class Job:
    """One background call. `work(job)` may call `job.step(done, total)` and should stop when
    `job.cancelled`; a cancelled job's result is dropped, never delivered.

    States: running -> done | failed | cancelled.
    """

    def __init__(
        self,
        work: Callable[[Job], Any],
        *,
        on_done: Callable[[Any], Any] | None = None,
        on_error: Callable[[BaseException], Any] | None = None,
        on_progress: Callable[[int, int, float], Any] | None = None,
        on_cancel: Callable[[], Any] | None = None,
        tick_s: float = 0.5,
    ):
        self._work, self._on_done, self._on_error = work, on_done, on_error
        self._on_progress, self._on_cancel, self._tick_s = on_progress, on_cancel, tick_s
        self.state = "idle"
        self.done_steps, self.total_steps = 0, 0
        self.started = 0.0
        self._finished = threading.Event()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set by `cancel()`: pass it as `EvalOptions.cancel` so a running evaluation stops with the job."""
        return self._cancel

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.started else 0.0

    def start(self) -> Job:
        self.state, self.started = "running", time.monotonic()
        self._thread = threading.Thread(target=self._run, name="kwb-job", daemon=True)
        self._thread.start()
        if self._on_progress is not None:
            threading.Thread(target=self._tick, name="kwb-job-tick", daemon=True).start()
        return self

    def step(self, done: int, total: int) -> None:
        self.done_steps, self.total_steps = done, total
        self._progress()

    def cancel(self) -> None:
        """Stop waiting now; the UI is told at once and whatever the work returns later is ignored."""
        if self.state != "running":
            return
        self._cancel.set()
        self.state = "cancelled"
        self._finished.set()
        if self._on_cancel is not None:
            call_on_main(self._on_cancel)

    def wait(self, timeout: float | None = None) -> bool:
        """True once the job finished, failed or was cancelled (for scripts and tests)."""
        return self._finished.wait(timeout)

    def _progress(self) -> None:
        if self._on_progress is not None and self.state == "running":
            done, total, elapsed = self.done_steps, self.total_steps, self.elapsed
            call_on_main(lambda: self._on_progress(done, total, elapsed) if self.state == "running" else None)

    def _tick(self) -> None:
        while not self._finished.wait(self._tick_s):
            self._progress()

    def _run(self) -> None:
        try:
            value = self._work(self)
        except BaseException as exc:  # noqa: BLE001 - reported to the UI, never raised into a dead thread
            if not self._cancel.is_set():
                self.state = "failed"
                self._deliver(self._on_error, exc)
            return
        if self._cancel.is_set():
            return
        self.state = "done"
        self._deliver(self._on_done, value)

    def _deliver(self, callback: Callable[[Any], Any] | None, value: Any) -> None:
        # Without a kernel the callback runs here, so `wait()` returns only after it ran; with a kernel it is
        # queued on the main thread and `wait()` must not block that thread, so it returns at once.
        def run() -> None:
            try:
                if callback is not None:
                    callback(value)
            finally:
                self._finished.set()

        if not call_on_main(run):
            self._finished.set()


def discard_judge(device: str) -> None:
    """End the device's evaluation process (a hung kernel would hold it until its timeout); the next evaluation
    starts a fresh one. Any other evaluation in flight on it reports "crashed"."""
    from workbench.dispatch.pool import discard_judge as discard

    discard(device)
