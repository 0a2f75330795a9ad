"""The judge compiles its comparison kernels (`output_compare_fused`, `recheck_compare`) as soon as it starts, on a GPU.

Why: Triton compiles a kernel the first time a process launches it with a new kind of argument (an output dtype, a
length divisible by 16 or not). Compiled inside a check, the three kernels took 2.2 s of the first evaluation of a
real-size KernelBench LayerNorm on an H100 with an empty Triton cache: its whole check took 2.6 s, its comparisons 0.2 s
once compiled. Compiled here, in a thread of the judge's own, they overlap the judge's wait for its first job and that
job's runner start, and Triton's on-disk cache makes them a fraction of a second for every later judge on the machine.

The thread holds the device shared (`reference_compile.beside_the_judge`, as the reference's compile does), so no
measurement, this judge's or another's, runs while it compiles, and the judge's main thread gets the GIL first
meanwhile. A check's comparison that comes before the compile has ended waits for it (`output_compare_fused.usable`)
instead of compiling the same kernels beside it; a timed re-check cannot come meanwhile, since the timing holds the
device exclusively. Only the judge's own kernels and data are involved.
"""

from __future__ import annotations

import threading

import torch

from workbench.eval.judge.correctness import compare_fused as fused
from workbench.eval.judge.correctness import recheck as recheck_compare
from workbench.eval.judge.device_lock import DeviceLock
from workbench.eval.judge.reference.compiled import beside_the_judge

#: The output dtypes compiled for: KernelBench's problems' (others compile at their first comparison, as before; each
#: dtype here holds the first measurement of a judge's first job back by up to a second on a machine that never
#: compiled them).
DTYPES = (torch.float32,)


def compile_for(device: str, dtype: torch.dtype) -> None:
    """Launch the four kernels once on a few blocks of `dtype` (what a check's comparison and a timed re-check of such
    an output launch)."""
    # A length divisible by 16, as most outputs' are: Triton compiles a kernel apart for lengths that are not, and
    # that knowledge is worth keeping (compiled for any length, the checks' comparisons of a 256 MiB softmax output
    # took a median 0.27 s instead of 0.16 s, four judges on an H100).
    o = torch.linspace(-2, 2, 3 * fused.BLOCK, device=device).to(dtype)
    e = o.double()
    fused.native_error(o, e)
    fused.pair_worst(o, o, e, 1e-5, 1e-5, 0.0)
    fused.tally(o, o, e, 1e-5, 1e-5, 0.0)
    recheck_compare.count_off_kernel(o, o, 1e-5, 1e-5, 0.0)
    if o.is_cuda:
        torch.cuda.synchronize(device)


def start(device: str, lock: DeviceLock | None) -> threading.Thread | None:
    """The compile in a daemon thread (module doc); None off the GPU, where the kernels are not used."""
    if not device.startswith("cuda"):
        return None
    fused.WARMED.clear()

    def work() -> None:
        try:
            with beside_the_judge(device, lock):
                for dtype in DTYPES:
                    compile_for(device, dtype)
        except Exception:  # noqa: BLE001 - only a warm-up: a comparison compiles what it needs itself
            pass
        finally:
            fused.WARMED.set()

    thread = threading.Thread(target=work, name="kwb-warm-compare", daemon=True)
    thread.start()
    return thread
