"""One seed for the host and every GPU, cheaply: `torch.manual_seed` without its XPU and MPS halves, and without
its CUDA half where no CUDA device can exist.

Where a device cannot be used, `torch.manual_seed` still queues a lazy seeding call for it with a formatted stack
trace each time (XPU on a machine without one; CUDA on a torch built without CUDA or with every device hidden), at
0.2-1 ms a call. The engine seeds before every call of the correctness rounds and timed batches, and every input
draw, on both sides of the trust boundary, so that cost would be a large share of a CPU evaluation."""

from __future__ import annotations

import os

import torch

_host_generator = torch.default_generator
_seed_cuda = torch.cuda.manual_seed_all
#: Whether this torch can use CUDA at all (no driver call: a process that forks runners must not touch CUDA).
_CUDA_BUILT = torch.cuda._is_compiled()


def cuda_seedable() -> bool:
    """Whether CUDA generators may exist in this process: torch built with CUDA and not every device hidden."""
    return _CUDA_BUILT and os.environ.get("CUDA_VISIBLE_DEVICES") != ""


def seed_all(seed: int) -> None:
    """Seed the host generator and, where they may exist, every CUDA device's (what torch.manual_seed seeds here)."""
    seed = int(seed)
    _host_generator.manual_seed(seed)
    if cuda_seedable():
        _seed_cuda(seed)
