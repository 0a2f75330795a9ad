"""Timing statistics and the interleaved, rotated measurement loop (CPU)."""

from __future__ import annotations

import time

import pytest

from workbench import timing


def test_summarize_gives_median_iqr_and_an_order_statistic_ci():
    samples = [float(v) for v in range(1, 101)]  # 1..100
    t = timing.summarize(samples, "wall")
    assert t.median_ms == pytest.approx(50.5)
    assert t.min_ms == 1 and t.max_ms == 100 and t.n == 100
    assert t.iqr_ms == pytest.approx(75.25 - 25.75)
    # n=100: ranks 50 -+ 1.96*sqrt(100)/2 -> 40 and 61 (1-based).
    assert (t.ci95_low_ms, t.ci95_high_ms) == (40.0, 61.0)
    one = timing.summarize([3.0], "wall")
    assert one.median_ms == one.ci95_low_ms == one.ci95_high_ms == 3.0


def test_measure_interleaves_callables_and_rotates_input_sets():
    seen: dict[str, list[int]] = {"a": [], "b": []}
    pool = [[i] for i in range(3)]
    fns = {name: (lambda xs, name=name: seen[name].append(xs[0]) or xs[0]) for name in seen}
    timings, last = timing.measure(fns, pool, device="cpu", warmup=1, reps=6, clock="wall")
    assert timings["a"].n == 6 and timings["b"].n == 6 and timings["a"].clock == "wall"
    timed_a = seen["a"][1:]
    assert all(x != y for x, y in zip(timed_a, timed_a[1:])), "consecutive calls must see different input sets"
    assert set(timed_a) == {0, 1, 2}
    assert last["a"][1] == last["a"][0][0]


def test_a_patched_perf_counter_after_import_does_not_change_measurements(monkeypatch):
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    t, _ = timing.measure({"sleep": lambda xs: time.sleep(0.002)}, [[0]], device="cpu", warmup=0, reps=3, clock="wall")
    assert t["sleep"].median_ms >= 1.5


def test_default_reps_meet_the_protocol():
    assert timing.default_reps("cuda", False)[1] >= 50
    warm, reps = timing.default_reps("cpu", True)
    assert reps >= 3
