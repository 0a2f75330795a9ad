"""Earlier rounds' reference outputs as the judge keeps them to recognise a stale result: whole when small, a
secret sample of positions when large, with the same answer either way."""

from __future__ import annotations

import pytest
import torch

from workbench.eval.judge.correctness import prior_outputs
from workbench.eval.judge.correctness.prior_outputs import PriorOutput


@pytest.mark.parametrize("sampled", [False, True])
def test_a_stale_output_matches_its_round_and_an_honest_wrong_one_does_not(monkeypatch, sampled):
    if sampled:
        monkeypatch.setattr(prior_outputs, "WHOLE_BYTES", 0)
        monkeypatch.setattr(prior_outputs, "SAMPLE", 4096)
    torch.manual_seed(0)
    old = torch.randn(300, 200)
    kept = PriorOutput.of(old)
    assert (kept.whole is None) == sampled and (kept.index is not None) == sampled
    if sampled:
        assert kept.values.numel() == 4096
    everywhere = torch.ones_like(old, dtype=torch.bool)
    assert kept.matches(old.clone(), everywhere)  # the earlier round's result returned again
    assert not kept.matches(old + 1.0, everywhere)  # wrong, but not stale
    half = old.clone()
    half[:120] = 7.0
    assert kept.matches(half, everywhere)  # 60% still holds the old result: more than STALE_SHARE
    assert not kept.matches(old.clone().reshape(200, 300), everywhere.reshape(200, 300))  # another shape
    assert not kept.matches(old.clone(), torch.zeros_like(everywhere))  # nothing wrong: nothing to explain


def test_positions_are_drawn_anew_for_every_output(monkeypatch):
    monkeypatch.setattr(prior_outputs, "WHOLE_BYTES", 0)
    monkeypatch.setattr(prior_outputs, "SAMPLE", 64)
    t = torch.randn(1000)
    assert not torch.equal(PriorOutput.of(t).index, PriorOutput.of(t).index)  # not predictable from the last one


def test_correctness_calls_borrow_the_timing_pools_first_set_and_slot():
    """A task of 8 GB inputs holds one shared copy of them: the check's calls use the pool's set 0 and slot 0 where
    shapes and dtypes match, and the pool is marked so timing rewrites every set before its first batch."""
    from types import SimpleNamespace

    from workbench.eval.judge.runners.session import CandidateSession

    session = CandidateSession(runner=None, device="cpu", timeout=5.0)
    try:
        x, x_ref = session.arena.tensor((4, 8), torch.float32)
        k, k_ref = session.arena.tensor((4,), torch.int64)
        slot, slot_ref = session.arena.tensor((4, 8), torch.float32)
        pool = SimpleNamespace(sets=[[x, 3, k]], refs=[(x_ref, 3, k_ref)], slots=[slot], slot_refs=[slot_ref],
                               lent=False)
        session.lend_pool(pool)
        assert pool.lent
        first, ref = session._buffer((4, 8), torch.float32, pooled=True)
        second, ref2 = session._buffer((4, 8), torch.float32, pooled=True)
        assert {first.data_ptr(), second.data_ptr()} == {x.data_ptr(), slot.data_ptr()}  # set 0's input, slot 0
        assert session._buffer((4,), torch.int64, pooled=True)[0].data_ptr() == k.data_ptr()
        third, _ = session._buffer((4, 8), torch.float32, pooled=True)  # none left: a new shared buffer
        assert third.data_ptr() not in {x.data_ptr(), slot.data_ptr()}
    finally:
        session.arena.close()
