"""The CPU time a runner's process has used, read by the judge from each thread's /proc `schedstat` (nanoseconds;
`stat`'s ticks are too coarse for one call): nothing the runner controls (`checks/evidence.py` weighs the launch
reports with it). A thread that exits during a call takes its time with it, so the figure is a lower bound, which
never makes a forged report look paid for.
"""

from __future__ import annotations

import os


def cpu_ns(pid: int) -> int | None:
    """Nanoseconds of CPU used so far by every live thread of process `pid`; None where /proc does not say."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, read = 0, 0
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
            read += 1
        except (OSError, ValueError, IndexError):  # a thread that just exited, or no schedstat here
            continue
    return total if read else None
