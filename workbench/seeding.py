"""One seed for the host and every GPU, cheaply: `torch.manual_seed` without its XPU and MPS halves.

On a machine without those devices, `torch.manual_seed` still queues a lazy XPU seeding call with a formatted stack
trace each time (about 1 ms). The engine seeds before every call of the correctness rounds and timed batches, and
every input draw, on both sides of the trust boundary, so that millisecond was a second per evaluation.
"""

from __future__ import annotations

import torch

_host_generator = torch.default_generator
_seed_cuda = torch.cuda.manual_seed_all


def seed_all(seed: int) -> None:
    """Seed the host generator and every CUDA device's (the devices torch.manual_seed seeds on this machine)."""
    seed = int(seed)
    _host_generator.manual_seed(seed)
    _seed_cuda(seed)
