"""Runtime anti-cheating guards used inside the worker (issue 3). Stub contract: filled in by issue 3.

The worker calls these at fixed points of an evaluation:
  snap = snapshot_trusted()                 # before the candidate module is imported
  with track_launches(module) as log: ...   # around candidate calls during correctness checks
  check_launches(log, language, device)     # -> findings (decoy-kernel)
  baseline = thread_baseline(); ...call...; check_threads(baseline)  # -> findings (thread-deferral)
  verify_trusted(snap)                      # before timing and at the end -> findings (timer-patch)
  check_coverage(call, device, module)      # GPU only: profiler coverage -> findings (decoy/low-coverage)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.findings import Finding


@dataclass
class TrustedSnapshot:
    identities: dict[str, int] = field(default_factory=dict)


@dataclass
class LaunchLog:
    """Launches of the candidate's own kernels seen while the tracker was active."""

    launches: list[str] = field(default_factory=list)


def snapshot_trusted() -> TrustedSnapshot:
    return TrustedSnapshot()


def verify_trusted(snapshot: TrustedSnapshot) -> list[Finding]:
    return []


@contextlib.contextmanager
def track_launches(module: Any) -> Iterator[LaunchLog]:
    yield LaunchLog()


def check_launches(log: LaunchLog, language: str, device: str) -> list[Finding]:
    return []


def thread_baseline() -> int:
    import threading

    return threading.active_count()


def check_threads(baseline: int) -> list[Finding]:
    return []


def check_coverage(call: Callable[[], Any], device: str, module: Any) -> list[Finding]:
    return []
