"""The timing pool's refresh between rounds: new contents drawn straight into the shared sets (no set-sized
temporary the judge would then hold or hand back to the driver while the runner times), the values the task's
own input code gives for the drawn seed, and a whole draw where a task's shapes move with the seed."""

from __future__ import annotations

import random

import pytest
import torch

import workbench as wb
from workbench.eval.judge.timing.inputs import InputPool
from workbench.tasks.task import LoadedReference

SUM = """import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x, w):
        return (x * w).sum(1)
batch, dim = 8, 64
def get_inputs():
    return [torch.randn(batch, dim), torch.rand(dim).abs() + 1]
def get_init_inputs():
    return []
"""

MOVING = SUM.replace("torch.randn(batch, dim)", "torch.randn(batch + int(torch.randint(0, 3, ()).item()), dim)")


def _pool(tmp_path, source: str) -> tuple[InputPool, LoadedReference, dict]:
    path = tmp_path / "task.py"
    path.write_text(source)
    task = wb.load_kernelbench(path)
    ref = LoadedReference(task, str(tmp_path))
    size = task.size(None, "cpu")
    pool = InputPool(session=None, reference=ref, size=size, device="cpu", n=3, out_like=None)
    pool.sets = [ref.make_inputs(size, k, "cpu") for k in range(3)]
    return pool, ref, size


def test_refresh_writes_the_drawn_seeds_inputs_into_the_same_tensors(tmp_path):
    pool, ref, size = _pool(tmp_path, SUM)
    before = [[t.clone() for t in s] for s in pool.sets]
    addresses = [[t.data_ptr() for t in s] for s in pool.sets]
    pool.refresh(random.Random(7), count=2)
    seeds = random.Random(7)
    for k in range(2):
        expected = ref.make_inputs(size, seeds.randrange(1 << 62), "cpu")
        assert [t.data_ptr() for t in pool.sets[k]] == addresses[k]  # in place: the runner's mapping still holds
        for got, want, old in zip(pool.sets[k], expected, before[k], strict=True):
            assert torch.equal(got, want) and not torch.equal(got, old)
    assert all(torch.equal(a, b) for a, b in zip(pool.sets[2], before[2], strict=True))  # beyond `count`: kept
    assert pool.generation == 1


def test_refresh_of_a_task_whose_shapes_move_with_the_seed_copies_what_fits_and_raises_nothing(tmp_path):
    pool, _, _ = _pool(tmp_path, MOVING)
    shapes = [[tuple(t.shape) for t in s] for s in pool.sets]
    weights = [s[1].clone() for s in pool.sets]
    for seed in range(6):
        pool.refresh(random.Random(seed))
    assert [[tuple(t.shape) for t in s] for s in pool.sets] == shapes
    assert any(not torch.equal(s[1], w) for s, w in zip(pool.sets, weights, strict=True))


def test_release_if_short_does_nothing_off_the_gpu():
    from workbench.eval.wire.tensors import release_if_short

    assert release_if_short("cpu") is False


@pytest.mark.parametrize("count", [None, 0])
def test_every_refresh_is_one_generation_whatever_it_writes(tmp_path, count):
    pool, _, _ = _pool(tmp_path, SUM)
    pool.refresh(random.Random(0), count=count)
    assert pool.generation == 1


def test_a_refresh_given_its_seeds_writes_the_same_contents_again(tmp_path):
    """Timing writes a round's contents before each side's batch (`timing.PairTimer._round`): the second write,
    from the seeds the first returned, must give the candidate exactly what the reference was timed on (and what
    the judge's re-check outputs were computed on), and count as the same generation."""
    pool, _, _ = _pool(tmp_path, SUM)
    seeds = pool.refresh(random.Random(3))
    first = [[t.clone() for t in s] for s in pool.sets]
    for s in pool.sets:
        for t in s:
            t.zero_()
    assert pool.refresh(None, seeds=seeds) == seeds
    assert all(torch.equal(a, b) for s, f in zip(pool.sets, first, strict=True) for a, b in zip(s, f, strict=True))
    assert pool.generation == 1
