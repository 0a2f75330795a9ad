"""Statistics: the order-statistic CI of the median at every size, the stopping rule on synthetic samples of known
noise, and the bootstrap speedup CI with its verdict (distribution, coverage, symmetry, speed)."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from workbench.eval.judge import verdict
from workbench.eval.judge.timing import stats
from workbench.eval.judge.timing.stats import StoppingRule
from workbench.result import SPEEDUP_VERDICTS, Timing


def _brute_lower_rank(n: int, level: float) -> int:
    """Largest j with 1 - 2 P(Binomial(n, 1/2) <= j - 1) >= level, summing the CDF up from 0 in exact fractions."""
    tail = (1 - Fraction(str(level))) / 2
    bound = tail.numerator * 2**n  # cum / 2^n > tail  <=>  cum * tail.denominator > bound
    cum, c, j = 0, 1, 0
    for k in range(n + 1):
        cum += c
        if cum * tail.denominator > bound:
            break
        j = k + 1
        c = c * (n - k) // (k + 1)
    return max(j, 1)


# ---- median_ci_ranks and summarize ----------------------------------------------------------------------------------

@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
@pytest.mark.parametrize("n", [*range(1, 41), 99, 100, 1023, 1024, 1025, 1500, 4096, 10_001])
def test_ci_ranks_match_the_binomial_definition_on_both_the_exact_and_the_float_path(n, level):
    lo, hi = stats.median_ci_ranks(n, level)
    assert (lo, hi) == (_brute_lower_rank(n, level), n + 1 - _brute_lower_rank(n, level))


def test_known_ranks_and_the_float_path_handing_exact_ties_to_integers():
    assert stats.median_ci_ranks(100) == (40, 61)
    assert stats.median_ci_ranks(1000) == (469, 532)
    assert stats.median_ci_ranks(10_000) == (4902, 5099)
    # P(B <= 0) = 1/4 exactly for n = 2: a float comparison at the bound is not trusted.
    assert stats._lower_rank_float(2, 0.25) is None
    assert stats._lower_rank_exact(2, 1, 2) == 0
    with pytest.raises(ValueError):
        stats.median_ci_ranks(0)


def test_summarize_carries_the_stop_reason():
    t = stats.summarize([3.0, 1.0, 2.0], "wall", stop_reason="ci-target")
    assert isinstance(t, Timing) and t.stop_reason == "ci-target" and t.median_ms == 2.0


# ---- the stopping rule ---------------------------------------------------------------------------------------------

def _feed(stopper, draw, batch=10, limit=100_000):
    while not stopper.done() and stopper.n < limit:
        stopper.add(draw(batch))
    return stopper


def _rel_width(samples):
    t = stats.summarize(samples, "wall")
    return (t.ci95_high_ms - t.ci95_low_ms) / t.median_ms


def test_noise_free_samples_stop_at_the_minimum_count_not_before():
    st = StoppingRule(min_samples=50).start()
    done = [st.add([1.0] * 10) for _ in range(5)]
    assert done == [False, False, False, False, True]
    assert (st.n, st.reason, st.rel_ci_width) == (50, "ci-target", 0.0)


def test_gaussian_noise_stops_at_the_first_batch_whose_ci_reaches_the_target():
    sigma, target = 0.02, 0.01
    rng = np.random.default_rng(3)
    st = _feed(StoppingRule(target_rel_ci=target, time_cap_s=1e9).start(),
               lambda b: 1.0 + sigma * rng.standard_normal(b))
    assert st.reason == "ci-target"
    assert _rel_width(st.samples_ms) <= target < _rel_width(st.samples_ms[:-10])
    # 95% CI of the median of a normal ~ 2 * 1.96 * 1.2533 sigma / sqrt(n) wide: n ~ 96 for 2% noise and 1% target.
    predicted = (2 * 1.96 * math.sqrt(math.pi / 2) * sigma / target) ** 2
    assert 0.5 * predicted <= st.n <= 2 * predicted


def test_quantized_samples_plateau_k_batches_after_the_minimum():
    # Timer ticks of 0.1 ms: the CI of the median spans both ticks for ever, so its width never shrinks.
    st = _feed(StoppingRule(min_samples=50, plateau_batches=10, time_cap_s=1e9).start(), lambda b: [1.0, 1.1] * (b // 2))
    assert (st.reason, st.n) == ("plateau", 50 + 10 * 10)
    assert st.widths[-11:] == [pytest.approx(0.1 / 1.05)] * 11


@pytest.mark.parametrize("seed", range(4))
def test_iid_noise_does_not_plateau_while_the_ci_is_still_narrowing(seed):
    # 20% lognormal noise needs ~9600 samples for a 1% CI; the plateau rule may stop it earlier, but only once
    # the CI narrows by under 2% over 10 batches (n > ~1000), not on the jitter of the width.
    rng = np.random.default_rng(seed)
    st = _feed(StoppingRule(time_cap_s=1e9).start(), lambda b: rng.lognormal(0.0, 0.2, b))
    assert st.reason == "plateau" and 1000 <= st.n <= 6000
    assert max(st.widths[-11:]) - min(st.widths[-11:]) <= 0.02 * st.widths[-1]


def test_max_reps_and_remaining():
    rng = np.random.default_rng(0)
    st = StoppingRule(min_samples=50, max_samples=300, plateau_batches=0, time_cap_s=1e9).start()
    assert st.remaining == 300
    _feed(st, lambda b: rng.lognormal(0.0, 0.3, b), batch=25)
    assert (st.reason, st.n, st.remaining) == ("max-reps", 300, 0)


def test_time_cap_wins_over_the_minimum_and_counts_dropped_batches():
    st = StoppingRule(min_samples=50, time_cap_s=3.5).start()
    assert [st.add([1.0, 2.0], elapsed_s=1.0) for _ in range(3)] == [False] * 3
    assert st.add([], elapsed_s=1.0)  # a batch dropped for throttling: no samples, its time still counts
    assert (st.reason, st.n, st.batches, st.elapsed_s) == ("time-cap", 6, 4, 4.0)
    # Without elapsed_s the batch costs the sum of its samples: 10 x 100 ms = 1 s a batch.
    st2 = StoppingRule(min_samples=50, time_cap_s=3.5).start()
    _feed(st2, lambda b: [100.0] * b)
    assert (st2.reason, st2.n) == ("time-cap", 40)


def test_fixed_counts_and_a_reason_that_sticks():
    st = StoppingRule.fixed(5).start()
    assert not st.add([1.0, 9.0]) and not st.add([5.0, 3.0]) and st.add([2.0, 7.0])
    assert (st.reason, st.n) == ("fixed", 6)
    st.add([100.0] * 100)  # kept for the statistics, the reason stays
    assert (st.reason, st.n) == ("fixed", 106)
    assert set(stats.STOP_REASONS) == {"fixed", "ci-target", "plateau", "max-reps", "time-cap"}


@pytest.mark.parametrize("kwargs", [dict(min_samples=60, max_samples=50), dict(min_samples=5), dict(min_samples=0),
                                    dict(time_cap_s=0), dict(plateau_tol=1.0), dict(target_rel_ci=-0.1)])
def test_invalid_rules_are_refused(kwargs):
    with pytest.raises(ValueError):
        StoppingRule(**kwargs)


@pytest.mark.parametrize("bad", [[-1.0], [float("nan")], [float("inf")]])
def test_invalid_samples_are_refused(bad):
    with pytest.raises(ValueError):
        StoppingRule().start().add(bad)


def test_joint_stops_when_both_are_done_and_keeps_timing_the_first():
    rng = np.random.default_rng(3)
    joint = StoppingRule(time_cap_s=1e9).start_joint()
    batches = 0
    while not joint.add({"reference": [2.0] * 10, "candidate": 1.0 + 0.02 * rng.standard_normal(10)}):
        batches += 1
        assert joint.stoppers["reference"].done() == (batches >= 5)
    ref, cand = joint.stoppers["reference"], joint.stoppers["candidate"]
    assert joint.reasons == {"reference": "ci-target", "candidate": "ci-target"}
    assert ref.n == cand.n > 50  # the reference kept being timed, interleaved, until the candidate was done
    t = cand.timing("cuda-events")
    assert (t.n, t.stop_reason, t.clock) == (cand.n, "ci-target", "cuda-events")
    assert (t.ci95_high_ms - t.ci95_low_ms) / t.median_ms == pytest.approx(cand.rel_ci_width)


def test_joint_time_cap_is_shared_and_names_the_one_not_done():
    joint = StoppingRule(plateau_batches=0, time_cap_s=5.0).start_joint(["ref", "cand"])
    done = [joint.add({"ref": [1.0] * 10, "cand": [1.0, 1.1] * 5}, elapsed_s=1.0) for _ in range(5)]
    done.append(joint.add({}, elapsed_s=1.0))  # a batch dropped for throttling still costs its time
    assert done == [False] * 5 + [True]  # elapsed counted once per interleaved batch: 6 s > 5 s
    assert joint.stoppers["cand"].n == 50
    assert joint.reasons == {"ref": "ci-target", "cand": "time-cap"}
    with pytest.raises(ValueError, match="known"):
        joint.add({"other": [1.0]})


def test_an_extended_pair_goes_on_past_its_cap_and_bound_once():
    joint = StoppingRule(plateau_batches=0, min_samples=10, max_samples=20, time_cap_s=5.0).start_joint(["ref", "cand"])
    noisy = [1.0, 1.5] * 5
    while not joint.add({"ref": noisy, "cand": noisy}, elapsed_s=0.1):
        pass
    assert joint.reasons == {"ref": "max-reps", "cand": "max-reps"} and joint.stoppers["cand"].n == 20
    assert joint.extend(time_cap_s=5.5, max_samples=100)
    assert not joint.done() and joint.reasons == {"ref": "", "cand": ""}
    batches = 0
    while not joint.add({"ref": noisy, "cand": noisy}, elapsed_s=1.0):
        batches += 1
    assert batches == 5  # 0.2 s + 6 x 1 s passes the extended 5.5 s cap on the sixth batch
    assert joint.reasons == {"ref": "time-cap", "cand": "time-cap"} and joint.stoppers["cand"].n == 80
    assert not joint.extend(time_cap_s=60.0, max_samples=1000)  # once only
    assert joint.done()


# ---- the A/B verdict -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("low", "high", "expected"), [
    (1.03, 1.20, "faster"), (1.0201, 1.03, "faster"),
    (1.02, 1.20, "inconclusive"),  # touches the band edge: not wholly above it
    (1.01, 1.05, "inconclusive"),  # above 1 but maybe within run-to-run noise
    (0.99, 1.01, "same"), (1 / 1.02, 1.02, "same"),
    (0.97, 1.01, "inconclusive"), (0.90, 1.10, "inconclusive"),
    (0.50, 0.90, "slower"), (0.97, 0.98, "slower"),  # 0.98 < 1/1.02 = 0.98039
])
def test_verdict_of_a_ci_against_the_band(low, high, expected):
    assert verdict.speedup_label(low, high, 0.02) == expected
    # Swapping reference and candidate inverts the CI and swaps faster with slower exactly.
    mirror = {"faster": "slower", "slower": "faster"}.get(expected, expected)
    assert verdict.speedup_label(1 / high, 1 / low, 0.02) == mirror


def _lognormal(seed, n, sigma, scale=1.0):
    return (scale * np.random.default_rng(seed).lognormal(0.0, sigma, n)).tolist()


def test_identical_distributions_give_a_ci_around_one_and_same():
    s = verdict.speedup(_lognormal(1, 1000, 0.01), _lognormal(2, 1000, 0.01))
    assert s.low < 1 < s.high and s.high - s.low < 0.01
    assert s.verdict == "same" and s.verdict in SPEEDUP_VERDICTS
    assert "bootstrap" in s.method and "2000" in s.method and (s.band, s.level) == (verdict.DEFAULT_BAND, 0.95)
    assert verdict.DEFAULT_BAND == 0.03 and "noise band 3.0%" in s.method


def test_a_ten_percent_shift_with_low_noise_is_faster_and_its_mirror_slower():
    ref, cand = _lognormal(1, 500, 0.01), _lognormal(2, 500, 0.01, scale=1 / 1.1)
    fast = verdict.speedup(ref, cand)
    assert fast.verdict == "faster" and fast.low < 1.1 < fast.high and fast.speedup == pytest.approx(1.1, rel=0.01)
    slow = verdict.speedup(cand, ref)
    assert slow.verdict == "slower" and slow.speedup == pytest.approx(1 / fast.speedup)
    assert (slow.low, slow.high) == pytest.approx((1 / fast.high, 1 / fast.low), rel=2e-3)


def test_a_one_percent_shift_near_the_band_edge_is_inconclusive():
    s = verdict.speedup(_lognormal(1, 40, 0.05), _lognormal(2, 40, 0.05, scale=1 / 1.01))
    assert s.band == verdict.DEFAULT_BAND  # rounds scattering by 5% (MAD about 3.4%): the floor
    assert s.verdict == "inconclusive" and (s.low < 1 / 1.03 < s.high or s.low < 1.03 < s.high)


def test_noisy_rounds_widen_the_band_up_to_its_cap():
    quiet = verdict.speedup(_lognormal(1, 300, 0.002), _lognormal(2, 300, 0.002))
    noisy = verdict.speedup(_lognormal(1, 300, 0.08), _lognormal(2, 300, 0.08))
    wild = verdict.speedup(_lognormal(1, 300, 0.5), _lognormal(2, 300, 0.5))
    assert quiet.band == verdict.DEFAULT_BAND and wild.band == verdict.MAX_BAND
    assert verdict.DEFAULT_BAND < noisy.band < verdict.MAX_BAND
    assert noisy.band == pytest.approx(0.08 * 0.6745, rel=0.2)  # the MAD of a lognormal of sigma 0.08


def test_identical_code_in_two_processes_is_same_despite_the_process_offset():
    # A memory-bound kernel against itself: rounds that agree within 0.1%, the candidate's process 2% slower
    # throughout (KernelBench L1/39 on an H100 read 0.979 and 0.981 [0.978, 0.982]; two fresh runners of the
    # reference 1.8% apart). Inside the 3% floor: same, where a 2% band called identical code slower or inconclusive.
    ref = _lognormal(1, 12, 0.001)
    cand = [v * 1.021 for v in _lognormal(2, 12, 0.001)]
    s = verdict.speedup(ref, cand, paired=True)
    assert s.high < 1 / 1.021 * 1.002 and s.verdict == "same"
    assert verdict.speedup(ref, cand, paired=True, band=0.02).verdict in ("slower", "inconclusive")


def test_a_launch_bound_pair_that_reads_slower_by_its_own_noise_is_not_called_slower():
    # A 48 us convolution against itself: rounds scattering by 15% on both sides, one process 8% slower (the GPU
    # test that read 0.87 [0.72, 0.94] "slower" with a fixed band).
    rng = np.random.default_rng(5)
    ref = (0.05 * rng.lognormal(0.0, 0.15, 80)).tolist()
    cand = (0.054 * rng.lognormal(0.0, 0.15, 80)).tolist()
    s = verdict.speedup(ref, cand, paired=True)
    assert s.band == verdict.MAX_BAND and s.speedup < 0.97 and s.verdict != "slower"
    assert verdict.speedup(ref, cand, paired=True, band=0.02).verdict == "slower"


def test_a_candidate_with_erratic_batches_cannot_widen_the_band_past_the_references_noise():
    # 25% slower, its own batches made to scatter by 30%: the ratios' spread is the candidate's doing, the
    # reference's rounds agree within 0.5%, so the band stays at its floor and the verdict is slower.
    rng = np.random.default_rng(6)
    ref = (1.0 * rng.lognormal(0.0, 0.005, 300)).tolist()
    cand = (1.25 * rng.lognormal(0.0, 0.3, 300)).tolist()
    s = verdict.speedup(ref, cand, paired=True)
    assert s.band == verdict.DEFAULT_BAND and s.verdict == "slower"
    ratios = np.asarray(ref) / np.asarray(cand)
    assert verdict.noise_band(ratios.tolist(), [1.0] * 300, paired=True) > 0.05  # a ratio-only band would widen


def test_a_real_fifteen_percent_win_on_noisy_rounds_is_still_faster():
    rng = np.random.default_rng(7)
    drift = rng.lognormal(0.0, 0.15, 400)
    ref = (3.0 * drift * rng.lognormal(0.0, 0.04, 400)).tolist()
    cand = (3.0 / 1.15 * drift * rng.lognormal(0.0, 0.04, 400)).tolist()
    s = verdict.speedup(ref, cand, paired=True)
    assert s.band < 0.06 and s.verdict == "faster" and s.low < 1.15 < s.high


def test_too_few_samples_are_inconclusive_whatever_the_interval():
    s = verdict.speedup([10.0, 10.1, 10.2, 9.9, 10.0], [1.0, 1.01, 0.99, 1.0, 1.02])
    assert s.low > 5 and s.verdict == "inconclusive" and "fewer than 10" in s.method


def test_the_interval_is_deterministic_given_the_seed():
    ref, cand = _lognormal(1, 200, 0.05), _lognormal(2, 200, 0.05)
    assert verdict.speedup(ref, cand, seed=7) == verdict.speedup(ref, cand, seed=7)
    assert verdict.speedup(ref, cand, seed=7).low != verdict.speedup(ref, cand, seed=8).low


@pytest.mark.parametrize("n", [9, 51])
def test_bootstrap_medians_follow_the_exact_bootstrap_distribution_for_odd_n(n):
    # Resampling n draws: P(median* <= x_(j)) = P(Binomial(n, j/n) >= (n + 1) / 2) exactly.
    x = np.sort(np.random.default_rng(0).lognormal(0.0, 0.3, n))
    draws = stats.bootstrap_medians(x, 200_000, np.random.default_rng(1))
    for j in range(1, n + 1):
        p = j / n
        exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range((n + 1) // 2, n + 1))
        assert np.mean(draws <= x[j - 1]) == pytest.approx(exact, abs=0.005)


@pytest.mark.parametrize("n", [2, 10, 100])
def test_bootstrap_medians_match_explicit_resampling_for_even_n(n):
    x = np.sort(np.random.default_rng(0).lognormal(0.0, 0.3, n))
    fast = stats.bootstrap_medians(x, 100_000, np.random.default_rng(1))
    explicit = np.median(x[np.random.default_rng(2).integers(0, n, size=(50_000, n))], axis=1)
    # Both are discrete (midpoints of pairs of samples): compare the CDFs on the explicit support.
    support = np.unique(explicit)
    cdf_fast = np.searchsorted(np.sort(fast), support, side="right") / fast.size
    cdf_explicit = np.searchsorted(np.sort(explicit), support, side="right") / explicit.size
    assert np.abs(cdf_fast - cdf_explicit).max() < 0.01
    assert np.isin(fast, support).mean() > 0.999  # no value explicit resampling cannot produce
    if n == 2:  # min, mean, max with probabilities 1/4, 1/2, 1/4
        assert [np.mean(fast == v) for v in (x[0], 0.5 * (x[0] + x[1]), x[1])] == pytest.approx([0.25, 0.5, 0.25],
                                                                                               abs=0.01)


def test_the_95_percent_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    hits = 0
    for seed in range(200):
        s = verdict.speedup(_lognormal(2 * seed, 200, 0.05), _lognormal(2 * seed + 1, 200, 0.05, scale=1 / 1.05),
                          seed=seed)
        hits += s.low <= 1.05 <= s.high
    assert 0.90 <= hits / 200 <= 0.99


def _drifting_rounds(seed, n, ratio, sigma=0.01):
    """Round means of two sides whose machine drifts (slow waves of +-25%, both sides alike within a round) with
    `ratio` = reference / candidate and small independent noise on each side."""
    rng = np.random.default_rng(seed)
    drift = 1.0 + 0.25 * np.sin(np.linspace(0, 6 * np.pi, n)) + 0.1 * rng.standard_normal(n)
    ref = 3.0 * drift * rng.lognormal(0.0, sigma, n)
    cand = 3.0 / ratio * drift * rng.lognormal(0.0, sigma, n)
    return ref.tolist(), cand.tolist()


def test_paired_rounds_keep_a_common_drift_out_of_the_interval():
    ref, cand = _drifting_rounds(0, 40, 1.0)
    unpaired, paired = verdict.speedup(ref, cand), verdict.speedup(ref, cand, paired=True)
    assert unpaired.verdict == "inconclusive" and unpaired.high - unpaired.low > 0.1
    assert paired.verdict == "same" and paired.high - paired.low < 0.02 and "paired" in paired.method
    ratios = np.asarray(ref) / np.asarray(cand)
    assert paired.speedup == pytest.approx(float(np.median(ratios)))  # the median of the per-round ratios
    assert unpaired.speedup == pytest.approx(float(np.median(ref) / np.median(cand)))


def test_a_real_five_percent_win_under_drift_is_faster_only_when_paired():
    ref, cand = _drifting_rounds(1, 40, 1.05)
    paired = verdict.speedup(ref, cand, paired=True)
    assert paired.verdict == "faster" and paired.low < 1.05 < paired.high
    assert verdict.speedup(ref, cand).verdict == "inconclusive"


def test_pairing_broken_by_shuffling_one_side_gives_the_wide_interval_back():
    ref, cand = _drifting_rounds(2, 40, 1.0)
    shuffled = list(np.random.default_rng(3).permutation(cand))
    s = verdict.speedup(ref, shuffled, paired=True)
    assert s.verdict == "inconclusive" and s.high - s.low > 0.1


def test_paired_falls_back_to_independent_resampling_when_counts_differ():
    ref, cand = _lognormal(1, 30, 0.01), _lognormal(2, 31, 0.01)
    assert verdict.speedup(ref, cand, paired=True) == verdict.speedup(ref, cand)


def test_paired_coverage_is_about_95_percent():
    hits = 0
    for seed in range(200):
        ref, cand = _drifting_rounds(seed, 60, 1.05, sigma=0.03)
        s = verdict.speedup(ref, cand, paired=True, seed=seed)
        hits += s.low <= 1.05 <= s.high
    assert 0.88 <= hits / 200 <= 0.99


def test_two_thousand_samples_compare_in_well_under_50_ms():
    ref, cand = _lognormal(1, 1000, 0.05), _lognormal(2, 1000, 0.05)
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        verdict.speedup(ref, cand)
        best = min(best, time.perf_counter() - t0)
    assert best < 0.05


@pytest.mark.parametrize(("ref", "cand", "kwargs"), [
    ([], [1.0], {}), ([1.0], [0.0], {}), ([1.0, -2.0], [1.0], {}), ([float("nan")], [1.0], {}),
    ([1.0], [1.0], {"resamples": 500}), ([1.0], [1.0], {"level": 1.0}),
])
def test_compare_refuses_what_it_cannot_judge(ref, cand, kwargs):
    with pytest.raises(ValueError):
        verdict.speedup(ref, cand, **kwargs)


@pytest.mark.parametrize("n", [3, 5, 9])
def test_few_paired_rounds_decide_when_every_round_is_far_beyond_the_band(n):
    """Fewer than MIN_AB_SAMPLES rounds (a slow kernel within the time cap): a 50x slower or 3x faster candidate is
    decided, both directions, not "inconclusive"."""
    rng = np.random.default_rng(n)
    ref = [1.0 + 0.001 * rng.standard_normal() for _ in range(n)]
    slow = [r * 52.9 * (1 + 0.002 * rng.standard_normal()) for r in ref]
    fast = [r / 3.0 * (1 + 0.01 * rng.standard_normal()) for r in ref]
    s = verdict.speedup(ref, slow, paired=True)
    assert s.verdict == "slower" and s.high < 1 / 1.03 and f"{n} paired rounds" in s.method
    assert verdict.speedup(ref, fast, paired=True).verdict == "faster"


@pytest.mark.parametrize("n", [3, 5, 9])
def test_few_paired_rounds_of_identical_code_are_not_called_faster_or_slower(n):
    rng = np.random.default_rng(10 + n)
    ref = [1.0 + 0.003 * rng.standard_normal() for _ in range(n)]
    same = [r * (1 + 0.003 * rng.standard_normal()) for r in ref]
    assert verdict.speedup(ref, same, paired=True).verdict in ("same", "inconclusive")
    if n >= 5:
        assert verdict.speedup(ref, same, paired=True).verdict == "same"


def test_few_rounds_that_truly_disagree_stay_inconclusive_and_one_round_decides_nothing():
    assert verdict.speedup([1.0, 1.0, 1.0], [0.5, 1.0, 4.0], paired=True).verdict == "inconclusive"
    assert verdict.speedup([1.0], [0.02], paired=True).verdict == "inconclusive"
    # Every round beyond the band but close to it and scattered: the sign test needs n >= 6 at 5%, the interval
    # must clear the band too.
    assert verdict.speedup([1.0] * 4, [0.95, 0.6, 0.9, 0.5], paired=True).verdict == "inconclusive"
