"""The CPU time a runner's process has used, read by the judge from /proc: what a call cost the runner, measured by
nothing the runner controls (`checks/evidence.py` weighs the candidate's launch reports with it).

Each thread's `schedstat` counts nanoseconds on a CPU; `stat` counts 10 ms ticks, far too coarse for one call. A
thread that exits during a call takes its time with it, so the figure is a lower bound: it can only make a call look
cheaper, which never makes a forged report look paid for.
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
