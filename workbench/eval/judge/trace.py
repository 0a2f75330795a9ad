"""Where an evaluation's seconds go in time, not only in total: with `KWB_JUDGE_TRACE` set to a folder, the judge
records each stage as a span and each message it sends a runner or reads from one as an instant, with the thread and
the runner's role, on one clock, and writes them per evaluation as JSON lines (`benchmarks/eval_trace.py` prints
them as a timeline).

Why: `stage_seconds` says how long each stage took, not what waited on what. Several things overlap in one
evaluation (the candidate's import, the reference's runner starting and building, the next candidate's spare, the
reference's background compile, reference rounds made beside the runner's calls), so a stage's seconds alone do not
say which of them is on the critical path; the timeline does. cProfile (`KWB_JUDGE_PROFILE`) slows the judge's
Python work by half again and says nothing of the runners.

Off (the default), every hook is one attribute test. Nothing here decides anything: it only records.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
#: The current evaluation's events (None: tracing is off or no evaluation runs).
_events: list[dict[str, Any]] | None = None
_origin = 0.0


def folder() -> str:
    return os.environ.get("KWB_JUDGE_TRACE", "")


def begin() -> None:
    """Start recording an evaluation's events (when `KWB_JUDGE_TRACE` is set)."""
    global _events, _origin
    if folder():
        with _lock:
            _events, _origin = [], time.perf_counter()


def end(label: str) -> str | None:
    """Stop recording and write the events to `<folder>/trace-<time>-<pid>.jsonl` with `label` on the first line;
    the file's path, or None when tracing is off."""
    global _events
    with _lock:
        events, _events = _events, None
    if events is None:
        return None
    os.makedirs(folder(), exist_ok=True)
    path = os.path.join(folder(), f"trace-{time.strftime('%H%M%S')}-{os.getpid()}-{int(_origin * 1e3) % 100000}.jsonl")
    with open(path, "w") as out:
        out.write(json.dumps({"label": label}) + "\n")
        for event in sorted(events, key=lambda e: e["t"]):
            out.write(json.dumps(event) + "\n")
    return path


def instant(name: str, **attrs: Any) -> None:
    """One moment: a message sent or read, a thread started."""
    if _events is not None:
        _add(name, time.perf_counter(), None, attrs)


@contextmanager
def span(name: str, **attrs: Any) -> Iterator[None]:
    """A stretch of the judge's own work, with its start and its length."""
    if _events is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        _add(name, started, time.perf_counter() - started, attrs)


def reported(message: Any) -> dict[str, Any]:
    """What a runner's reply says of its own seconds (a load's, a warm-up's), for its instant."""
    if _events is None:
        return {}
    return {k: round(float(getattr(message, k)), 4) for k in ("seconds", "warmup_seconds")
            if isinstance(getattr(message, k, None), (int, float))}


def ended(name: str, started: float, now: float, **attrs: Any) -> None:
    """A stretch measured by the caller's own clock (`time.perf_counter()` at its start and end)."""
    if _events is not None:
        _add(name, started, now - started, attrs)


def laps(prefix: str, **attrs: Any) -> Callable[[str], None]:
    """A lap clock: each call records the stretch since the previous one (or since this call) as `prefix name`."""
    if _events is None:
        return _no_lap
    last = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        ended(f"{prefix} {name}", last[0], now, **attrs)
        last[0] = now

    return lap


def _no_lap(name: str) -> None:
    pass


def _add(name: str, at: float, seconds: float | None, attrs: dict[str, Any]) -> None:
    event = {"t": round((at - _origin) * 1e3, 2), "name": name, "thread": threading.current_thread().name, **attrs}
    if seconds is not None:
        event["ms"] = round(seconds * 1e3, 2)
    with _lock:
        if _events is not None:
            _events.append(event)
