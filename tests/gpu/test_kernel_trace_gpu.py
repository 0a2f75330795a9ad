"""CUPTI's activity records read directly agree with the torch profiler: the same kernels, times within noise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch.device("cuda")


_PROFILED = r"""
import json, torch, triton, triton.language as tl
from torch.profiler import ProfilerActivity, profile

@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

x = torch.randn(4096, 4096, device="cuda"); y = torch.empty_like(x)
def call():
    torch.softmax(x, -1)
    double_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
call(); torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    call(); torch.cuda.synchronize()
from workbench.eval.runner.kernel_trace import profiler_kernels
print("KERNELS " + json.dumps(profiler_kernels(prof.events())))
"""


def _profiler_kernels() -> dict[str, float]:
    """The same call under the torch profiler, in its own process: one process has one CUPTI subscriber."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:  # triton.jit reads its source
        script.write(_PROFILED)
    # The script runs from /tmp: the project's root goes on its path, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, script.name], capture_output=True, text=True, timeout=300, env=env)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("KERNELS ")), None)
    assert line is not None, out.stderr[-2000:]
    return json.loads(line[len("KERNELS "):])


def test_cupti_kernels_match_the_torch_profiler(cuda):
    import triton
    import triton.language as tl

    from workbench.eval.runner.kernel_trace import KernelTracer

    @triton.jit
    def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

    x = torch.randn(4096, 4096, device=cuda)
    y = torch.empty_like(x)

    def call():
        torch.softmax(x, -1)
        double_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)

    call()
    tracer = KernelTracer()
    mine = tracer.trace(call, torch.cuda.synchronize)
    theirs = _profiler_kernels()
    assert "double_kernel" in mine, (tracer.lib, mine)
    only_mine = sorted(n[:90] for n in set(mine) - set(theirs))
    only_theirs = sorted(n[:90] for n in set(theirs) - set(mine))
    assert not only_mine and not only_theirs, f"only CUPTI: {only_mine}; only the profiler: {only_theirs}"
    for name, us in theirs.items():
        assert mine[name] == pytest.approx(us, rel=0.5), name
    again = tracer.trace(call, torch.cuda.synchronize)  # a second trace in the same process
    assert set(again) == set(mine)
