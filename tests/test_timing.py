"""Timing: statistics on known samples (median, IQR, the binomial CI of the median) and the interleaved, rotated
measurement loop on the CPU wall clock."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
import torch

from workbench.eval.judge.timing import stats
from workbench.eval.wire import timed_loop as timing


def _coverage(n: int, j: int) -> float:
    """P(x_(j) <= true median <= x_(n+1-j)) = 1 - 2 P(Binomial(n, 1/2) <= j - 1)."""
    return 1 - 2 * sum(math.comb(n, k) for k in range(j)) / 2**n


# ---- summarize -------------------------------------------------------------------------------------------------

def test_summarize_gives_median_spread_and_the_order_statistic_ci_of_known_samples():
    samples = [float(v) for v in range(1, 101)]
    random.Random(0).shuffle(samples)
    t = stats.summarize(samples, "wall")
    assert t.median_ms == pytest.approx(50.5) and (t.min_ms, t.max_ms, t.n, t.clock) == (1.0, 100.0, 100, "wall")
    assert t.iqr_ms == pytest.approx(75.25 - 25.75)  # quartiles by linear interpolation
    assert (t.ci95_low_ms, t.ci95_high_ms) == (40.0, 61.0)  # ranks 40 and 61: the textbook pair for n = 100
    assert t.samples_ms == samples  # in measurement order, for plots of drift


def test_small_samples_odd_counts_and_the_ci_falling_back_to_the_range():
    ten = stats.summarize([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0, 10.0], "cuda-events")
    assert ten.median_ms == 5.5 and (ten.ci95_low_ms, ten.ci95_high_ms) == (2.0, 9.0)
    five = stats.summarize([3.0, 1.0, 2.0, 5.0, 4.0], "interpreter")
    assert five.median_ms == 3.0 and (five.ci95_low_ms, five.ci95_high_ms) == (1.0, 5.0)
    one = stats.summarize([3.0], "wall")
    assert one.median_ms == one.ci95_low_ms == one.ci95_high_ms == one.min_ms == one.max_ms == 3.0
    assert one.iqr_ms == 0.0
    with pytest.raises(ValueError):
        stats.summarize([], "wall")


@pytest.mark.parametrize("n", [6, 7, 10, 20, 30, 50, 51, 100, 1000, 2000])
def test_ci_ranks_are_the_tightest_pair_with_at_least_95_percent_coverage(n):
    lo, hi = stats.median_ci_ranks(n)
    assert hi == n + 1 - lo
    assert _coverage(n, lo) >= 0.95 > _coverage(n, lo + 1)


# ---- defaults ------------------------------------------------------------------------------------------------------

def test_l2_flush_is_twice_the_reported_l2_or_256_mib(monkeypatch):
    assert timing.l2_flush_bytes("cpu") == 0
    monkeypatch.setattr(timing, "_properties", lambda device: SimpleNamespace(L2_cache_size=50 * 2**20))
    assert timing.l2_flush_bytes("cuda") == 100 * 2**20
    monkeypatch.setattr(timing, "_properties", lambda device: SimpleNamespace(L2_cache_size=0))
    assert timing.l2_flush_bytes("cuda:0") == 256 * 2**20


def _null(fixed=0.002, per_call=20e-6, noise=1e-4, launch=0.0):
    from workbench.eval.judge.timing.clock_check import NullFit

    return NullFit(fixed, per_call, noise, launch, 8)


def test_the_null_fit_recovers_the_harness_line_and_its_noise():
    from workbench.eval.judge.timing.clock_check import NullFit

    rng = random.Random(0)
    points = [(n, 0.003 + 25e-6 * n + rng.gauss(0, 5e-5)) for n in (1, 4, 8, 16) for _ in range(3)]
    fit = NullFit.fit(points)
    assert fit.fixed == pytest.approx(0.003, abs=1e-4) and fit.per_call == pytest.approx(25e-6, rel=0.2)
    assert 2e-5 < fit.noise < 1.5e-4 and fit.points == 12
    assert NullFit.fit([]).overhead(10) == 0.0
    flat = NullFit.fit([(4, 0.002), (4, 0.0022)])  # one size only: a mean, no slope
    assert flat.per_call == 0.0 and flat.fixed == pytest.approx(0.0021)


def _batches(calls, true_s, reported_s, count=10, fixed=0.002, per_call=20e-6, jitter=5e-5, seed=0):
    from workbench.eval.judge.timing.clock_check import Batch

    rng = random.Random(seed)
    return [Batch(calls, fixed + per_call * calls + calls * true_s + rng.gauss(0, jitter), reported_s)
            for _ in range(count)]


def test_an_honest_batch_agrees_with_the_judges_clock_even_for_a_launch_bound_op():
    from workbench.eval.judge.timing import clock_check

    for true_s in (3e-6, 180e-6, 12e-3):  # launch-bound, a GPU-bound softmax, a long kernel
        for calls in (1, 8, 40):
            assert clock_check.check(_batches(calls, true_s, true_s), _null()) == [], (true_s, calls)
    # Up to the launch overhead measured on a null kernel below J is honest (host work the runner's clock missed).
    assert clock_check.check(_batches(40, 30e-6, 22e-6), _null(launch=5e-6)) == []


@pytest.mark.parametrize("factor", [1 / 25, 1 / 8, 1 / 2.5])
def test_a_runner_reporting_a_fraction_of_its_time_is_timer_patch(factor):
    from workbench.eval.judge.timing import clock_check

    found = clock_check.check(_batches(20, 180e-6, 180e-6 * factor), _null())
    assert [f.flag for f in found] == ["timer-patch"]
    assert "judge's clock" in found[0].detail


@pytest.mark.parametrize("factor", [0.84, 0.6])
def test_a_moderate_deficit_puts_both_sides_on_the_judges_clock_instead_of_rejecting(factor):
    """A null harness that does not fit the candidate (measured on an H100: an honest reference 16% under J) is not
    a forgery; the runner's figures are just not used."""
    from workbench.eval.judge.timing import clock_check

    verdict = clock_check.judge(_batches(20, 900e-6, 900e-6 * factor), _null())
    assert verdict.findings == [] and verdict.disagreed and not verdict.verified
    on_cpu = clock_check.judge(_batches(20, 900e-6, 900e-6 / 3), _null(), clock_check.GROSS_SHORTFALL["cpu"])
    assert on_cpu.findings == [] and on_cpu.disagreed


def test_reporting_more_than_the_whole_bracket_is_timer_patch():
    from workbench.eval.judge.timing import clock_check
    from workbench.eval.judge.timing.clock_check import Batch

    found = clock_check.check([Batch(10, 0.010, 0.002)], _null())
    assert [f.flag for f in found] == ["timer-patch"] and "reported 20.000 ms" in found[0].detail


def test_on_the_cpu_a_gross_deficit_must_show_in_the_runners_cpu_seconds():
    """Three one-call batches of a 7 ms kernel whose replies a loaded host delivered 40 ms late: the judge's clock
    reads 6x the report, but the runner's threads worked 7 ms a call: late wake-ups, not a forged clock. A runner
    that worked the same 7 ms and reported 1 ms is `timer-patch` whatever the host's delays."""
    from workbench.eval.judge.timing import clock_check
    from workbench.eval.judge.timing.clock_check import Batch

    null, gross = _null(), clock_check.GROSS_SHORTFALL["cpu"]
    late = [Batch(1, 0.002 + 20e-6 + 0.007 + 0.040, 0.007, cpu=0.0075) for _ in range(3)]
    assert clock_check.judge(late, null, gross).findings == []
    assert clock_check.judge(late, null, gross).disagreed
    assert [f.flag for f in clock_check.check([Batch(b.calls, b.bracket, 0.001, cpu=b.cpu) for b in late], null,
                                              gross)] == ["timer-patch"]
    # Where /proc did not say (no CPU seconds read), the judge's clock alone decides, as on the GPU.
    assert [f.flag for f in clock_check.check([Batch(1, b.bracket, 0.007) for b in late], null, gross)] == \
        ["timer-patch"]


def test_one_disturbed_batch_decides_nothing():
    from workbench.eval.judge.timing import clock_check
    from workbench.eval.judge.timing.clock_check import Batch

    batches = _batches(20, 180e-6, 180e-6)
    batches[3] = Batch(20, batches[3].bracket + 0.050, 180e-6)  # the machine stole 50 ms from one batch
    assert clock_check.check(batches, _null()) == []


def test_sets_that_fit_respects_the_memory_share_and_the_limits():
    from workbench.eval.judge.timing.inputs import MAX_SETS, sets_that_fit

    assert sets_that_fit(1 << 30, 16 << 30, 64) == 4  # a quarter of 16 GiB in 1 GiB sets
    assert sets_that_fit(1 << 30, 1 << 30, 64) == 1  # never fewer than one
    assert sets_that_fit(1 << 10, 16 << 30, 500) == MAX_SETS
    assert sets_that_fit(1 << 10, None, 7) == 7


def test_the_garbage_collector_is_off_inside_a_timed_batch_and_restored_after():
    """A collection lands in whichever call crosses an allocation count, and costs more in a process holding more
    objects (the candidate's runner after its checks, beside the reference's fresh one): off for the batch, as
    `timeit` does, and back to what it was afterwards."""
    import gc

    from workbench.eval.wire import timed_loop

    seen = []

    def fn(xs):
        seen.append(gc.isenabled())
        return xs[0] + 1

    sets = [[torch.ones(4)] for _ in range(3)]
    assert gc.isenabled()
    timed_loop.time_batch(fn, sets, [0, 1, 2], device="cpu", warmup=1)
    assert seen == [False] * 4 and gc.isenabled()
    gc.disable()
    try:
        timed_loop.time_batch(fn, sets, [0], device="cpu")
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()

    def boom(xs):
        raise RuntimeError("the candidate raised")

    with pytest.raises(RuntimeError):
        timed_loop.time_batch(boom, sets, [0], device="cpu")
    assert gc.isenabled()
