"""Between the two sides of a timed round the judge's GPU memory stays put: the pool's refresh draws into the
shared sets with no set-sized temporary, and the judge's cache goes back to the driver only where the runner would
otherwise run short (memory handed back is cleared by the GPU while the runner times: identical code read 15-25%
slower)."""

from __future__ import annotations

import random

import pytest
import torch
from test_pool_refresh import SUM

import workbench as wb
from workbench.eval.judge.timing.inputs import InputPool
from workbench.eval.wire.tensors import release_if_short
from workbench.tasks.task import LoadedReference

pytestmark = pytest.mark.gpu


def test_refresh_on_the_gpu_needs_no_temporary_the_size_of_a_set(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(SUM.replace("batch, dim = 8, 64", "batch, dim = 4096, 16384"))  # a 256 MiB input
    task = wb.load_kernelbench(path)
    ref = LoadedReference(task, str(tmp_path))
    size = task.size(None, "cuda")
    pool = InputPool(session=None, reference=ref, size=size, device="cuda", n=1, out_like=None)
    pool.sets = [ref.make_inputs(size, 0, "cuda")]
    first = pool.sets[0][0].clone()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    pool.refresh(random.Random(1))
    grown = torch.cuda.max_memory_allocated() - before
    assert grown < pool.sets[0][0].nbytes // 8, f"refresh took {grown / 2**20:.0f} MiB beside a 256 MiB set"
    assert not torch.equal(first, pool.sets[0][0])


def test_the_cache_is_released_only_when_the_runner_would_run_short(monkeypatch):
    torch.cuda.init()
    block = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    del block
    reserved = torch.cuda.memory_reserved()
    assert release_if_short("cuda") is False and torch.cuda.memory_reserved() == reserved
    real = torch.cuda.mem_get_info
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (256 << 20, real(device)[1]))
    assert release_if_short("cuda") is True and torch.cuda.memory_reserved() <= reserved - (512 << 20)
