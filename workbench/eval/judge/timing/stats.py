"""Pure statistics of timing samples: `summarize` (median, spread, a distribution-free 95% CI of the median), stopping
rules on that CI's relative width (nvbench's stdrel, on the median: timings are skewed), `bootstrap_medians` for the
speedup's CI. Builtins are bound at import, so patching `sorted` or `math` later cannot move a stop."""
from __future__ import annotations

import bisect as _bisect
import math as _math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction as _Fraction

import numpy as np

from workbench.result import Timing

_sorted, _len, _min, _max, _float, _sum = sorted, len, min, max, float, sum
_comb, _isfinite, _inf = _math.comb, _math.isfinite, _math.inf
_exp, _lgamma, _LN2 = _math.exp, _math.lgamma, _math.log(2.0)
_insort = _bisect.insort

#: Why timing stopped (`Timing.stop_reason`), in the order they are checked when several hold at once.
STOP_REASONS = ("fixed", "ci-target", "plateau", "max-reps", "time-cap")


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int]:
    """1-based ranks (j, n + 1 - j) bounding a distribution-free CI of the median: samples below the median are
    Binomial(n, 1/2), so j is the largest rank with 1 - 2 P(B <= j - 1) >= `level` ([min, max] for n <= 5)."""
    if n < 1:
        raise ValueError("no samples")
    level_q = _Fraction(level).limit_denominator(10**6)
    num, den = level_q.numerator, level_q.denominator
    k = _lower_rank_float(n, (den - num) / (2 * den)) if n > _EXACT_RANKS_UP_TO else None
    if k is None:
        k = _lower_rank_exact(n, num, den)
    j = _max(k + 1, 1)
    return j, n + 1 - j


#: Up to this n the ranks come from exact integers alone; above, floats with an exact fallback.
_EXACT_RANKS_UP_TO = 1024


def _lower_rank_exact(n: int, num: int, den: int) -> int:
    """The largest k with P(B <= k) <= (1 - num/den) / 2, B ~ Binomial(n, 1/2) (-1 if none), in exact integers."""
    limit = (den - num) << n
    k = (n + 1) // 2 - 1
    if n % 2:
        c = _comb(n, k)
        t = 1 << (n - 1)  # P(B <= (n - 1) / 2) = 1/2
    else:
        mid = _comb(n, n // 2)
        c = mid * (n // 2) // (n // 2 + 1)  # C(n, n/2 - 1)
        t = (1 << (n - 1)) - mid // 2  # P(B <= n/2 - 1) = (1 - P(B = n/2)) / 2
    while k >= 0 and 2 * den * t > limit:
        t -= c
        c = c * k // (n - k + 1)  # C(n, k - 1)
        k -= 1
    return k


def _lower_rank_float(n: int, tail: float) -> int | None:
    """`_lower_rank_exact` in floats; None when a comparison falls within 1e-6 of the bound (the exact one decides)."""
    k = (n + 1) // 2 - 1
    p = _exp(_lgamma(n + 1) - _lgamma(k + 1) - _lgamma(n - k + 1) - n * _LN2)  # P(B = k)
    # P(B <= k): 1/2 for odd n; for even n, P(B = n/2) = P(B = n/2 - 1) (n/2 + 1) / (n/2)
    t = 0.5 if n % 2 else 0.5 - 0.5 * p * (n - k) / (k + 1)
    while k >= 0:
        if abs(t - tail) <= 1e-6 * tail:
            return None
        if t <= tail:
            break
        t -= p
        p *= k / (n - k + 1)
        k -= 1
    return k


def _quantile(s: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if _len(s) == 1:
        return s[0]
    pos = q * (_len(s) - 1)
    lo = int(pos)
    hi = _min(lo + 1, _len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _median_sorted(s: Sequence[float]) -> float:
    n = _len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def summarize(samples_ms: list[float], clock: str, side_stream_runs: int = 0, stop_reason: str = "") -> Timing:
    """Median, min, max, IQR and the order-statistic 95% CI of the median (`median_ci_ranks`) of the samples."""
    if not samples_ms:
        raise ValueError("no timing samples")
    s = _sorted(_float(v) for v in samples_ms)
    n = _len(s)
    median = _median_sorted(s)
    lo, hi = median_ci_ranks(n)
    return Timing(median_ms=median, min_ms=s[0], max_ms=s[-1], iqr_ms=_quantile(s, 0.75) - _quantile(s, 0.25),
                  ci95_low_ms=s[lo - 1], ci95_high_ms=s[hi - 1], n=n, clock=clock,
                  samples_ms=[_float(v) for v in samples_ms], side_stream_runs=side_stream_runs,
                  stop_reason=stop_reason)


def _as_sorted(samples: Iterable[float], what: str) -> np.ndarray:
    x = np.sort(np.asarray(list(samples), dtype=np.float64))
    if x.size == 0:
        raise ValueError(f"no {what} samples")
    if not (np.isfinite(x).all() and x[0] > 0):
        raise ValueError(f"{what} samples must be finite and > 0")
    return x


def _rank_index(u: np.ndarray, n: int) -> np.ndarray:
    """0-based index of x_(ceil(n u)), the order statistic a draw at quantile u lands on."""
    return np.clip(np.ceil(u * n).astype(np.int64) - 1, 0, n - 1)


def bootstrap_medians(x_sorted: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap medians of the sorted samples in O(resamples) without drawing them: the k-th smallest of n draws is
    x_(ceil(n U_(k))), U_(k) ~ Beta(k, n - k + 1); for even n, U_(k+1) given U_(k) = u is u + (1 - u) Beta(1, n - k)."""
    n = x_sorted.size
    if n % 2:
        k = (n + 1) // 2
        return x_sorted[_rank_index(rng.beta(k, n - k + 1, size=resamples), n)]
    k = n // 2
    u1 = rng.beta(k, n - k + 1, size=resamples)
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k, size=resamples)
    return 0.5 * (x_sorted[_rank_index(u1, n)] + x_sorted[_rank_index(u2, n)])


@dataclass(frozen=True)
class StoppingRule:
    """When a timing loop fed batch by batch may stop: after each batch, the first of STOP_REASONS that holds."""

    target_rel_ci: float = 0.01  # stop when (high - low) / median of the CI of the median is at most this
    min_samples: int = 50  # no "ci-target" or "plateau" stop before
    max_samples: int = 10_000
    time_cap_s: float = 10.0
    plateau_batches: int = 10  # batches over which the CI width changed by less than `plateau_tol` (0: no plateau rule)
    plateau_tol: float = 0.02
    level: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError(f"need 1 <= min_samples <= max_samples, got {self.min_samples}, {self.max_samples}")
        if self.min_samples < self.max_samples and self.min_samples < 6:
            # For n <= 5 the CI of the median is [min, max], below 95% coverage: an adaptive rule could stop on it.
            raise ValueError(f"an adaptive rule needs min_samples >= 6, got {self.min_samples}; "
                             "use StoppingRule.fixed(n) for a fixed small count")
        if not (self.target_rel_ci >= 0 and self.time_cap_s > 0 and self.plateau_batches >= 0
                and 0 <= self.plateau_tol < 1 and 0 < self.level < 1):
            raise ValueError(f"invalid stopping rule {self}")

    @classmethod
    def fixed(cls, n: int) -> StoppingRule:
        """Exactly n samples, no cap: stop reason "fixed"."""
        return cls(target_rel_ci=0.0, min_samples=n, max_samples=n, time_cap_s=_inf, plateau_batches=0)

    @property
    def is_fixed(self) -> bool:
        return self.min_samples == self.max_samples

    def start(self) -> Stopper:
        return Stopper(self)

    def start_joint(self, names: Iterable[str] = ("reference", "candidate")) -> JointStopper:
        return JointStopper(self, names)


def _rel_width(s: list[float], level: float) -> float:
    """(high - low) / median of the CI of the median of sorted samples; inf when undefined."""
    if not s:
        return _inf
    lo, hi = median_ci_ranks(_len(s), level)
    width, median = s[hi - 1] - s[lo - 1], _median_sorted(s)
    return width / median if median > 0 else (0.0 if width == 0 else _inf)


class Stopper:
    """One callable under a `StoppingRule`: `add` batches until `done()`; then its reason stays, samples still add."""

    def __init__(self, rule: StoppingRule):
        self.rule = rule
        self.samples_ms: list[float] = []  # in measurement order
        self._sorted: list[float] = []
        self.elapsed_s = 0.0
        self.batches = 0
        self.widths: list[float] = []  # relative CI width after each batch from min_samples on
        self.reason = ""  # one of STOP_REASONS, "" while it should go on

    @property
    def n(self) -> int:
        return _len(self._sorted)

    @property
    def remaining(self) -> int:
        """Samples still allowed before max_samples."""
        return _max(self.rule.max_samples - self.n, 0)

    @property
    def rel_ci_width(self) -> float:
        return _rel_width(self._sorted, self.rule.level)

    def done(self) -> bool:
        return bool(self.reason)

    def timing(self, clock: str, side_stream_runs: int = 0) -> Timing:
        return summarize(self.samples_ms, clock, side_stream_runs, stop_reason=self.reason)

    def add(self, samples_ms: Iterable[float], elapsed_s: float | None = None) -> bool:
        """Add one batch and its cost (default: its samples' sum; a dropped batch is `add([], s)`); returns `done()`."""
        batch = [_float(v) for v in samples_ms]
        for v in batch:
            if not (_isfinite(v) and v >= 0):
                raise ValueError(f"timing samples must be finite and >= 0, got {v!r}")
        if elapsed_s is None:
            elapsed_s = _sum(batch) / 1e3
        if elapsed_s < 0:
            raise ValueError(f"elapsed_s must be >= 0, got {elapsed_s!r}")
        self.samples_ms.extend(batch)
        for v in batch:
            _insort(self._sorted, v)
        self.elapsed_s += elapsed_s
        self.batches += 1
        if not self.reason:
            if self.n >= self.rule.min_samples and batch:
                self.widths.append(self.rel_ci_width)
            self.reason = self._decide()
        return self.done()

    def _plateaued(self) -> bool:
        k, w = self.rule.plateau_batches, self.widths
        if k == 0 or _len(w) <= k or not _isfinite(w[-1]):
            return False
        window = w[-1 - k:]
        return _max(window) - _min(window) <= self.rule.plateau_tol * w[-1]

    def _decide(self) -> str:
        r, n = self.rule, self.n
        if r.is_fixed:
            if n >= r.max_samples:
                return "fixed"
        elif n >= r.min_samples:
            if self.rel_ci_width <= r.target_rel_ci:
                return "ci-target"
            # The CI stopped narrowing (quantized or bimodal samples), judged on the whole window.
            if self._plateaued():
                return "plateau"
        if n >= r.max_samples:
            return "max-reps"
        if self.elapsed_s > r.time_cap_s:  # wins over min_samples, as nvbench's timeout does
            return "time-cap"
        return ""


class JointStopper:
    """Stoppers for callables timed interleaved: done when each is done by its own rule or their shared time passes
    the cap ("time-cap" for those not done). Done sides go on, so drift hits all alike."""

    def __init__(self, rule: StoppingRule, names: Iterable[str] = ("reference", "candidate")):
        # The cap applies to the pair's shared time, so the per-callable stoppers run without one.
        self.stoppers: dict[str, Stopper] = {name: Stopper(replace(rule, time_cap_s=_inf)) for name in names}
        if not self.stoppers:
            raise ValueError("JointStopper needs at least one name")
        self.elapsed_s = 0.0
        self.capped = self.extended = False
        self.time_cap_s = rule.time_cap_s

    def extend(self, time_cap_s: float, max_samples: int) -> bool:
        """Raise the time cap and each side's sample bound once (a "max-reps" side runs again); False if no change."""
        if self.extended or (time_cap_s <= self.time_cap_s and
                             all(s.rule.max_samples >= max_samples for s in self.stoppers.values())):
            return False
        self.extended = True
        self.time_cap_s = max(self.time_cap_s, time_cap_s)
        self.capped = self.elapsed_s > self.time_cap_s
        for s in self.stoppers.values():
            s.rule = replace(s.rule, max_samples=max(s.rule.max_samples, max_samples))
            if s.reason == "max-reps":
                s.reason = ""
        return True

    def add(self, batches: Mapping[str, Iterable[float]], elapsed_s: float | None = None) -> bool:
        """Add one interleaved batch (samples per name) and its whole cost, counted once; returns `done()`."""
        if unknown := set(batches) - set(self.stoppers):
            raise ValueError(f"unknown names {sorted(unknown)}; known: {sorted(self.stoppers)}")
        total = 0.0
        for name, samples in batches.items():
            batch = [_float(v) for v in samples]
            total += _sum(batch) / 1e3
            self.stoppers[name].add(batch, elapsed_s=0.0)
        self.elapsed_s += total if elapsed_s is None else elapsed_s
        if not all(s.done() for s in self.stoppers.values()) and self.elapsed_s > self.time_cap_s:
            self.capped = True
        return self.done()

    def done(self) -> bool:
        return self.capped or all(s.done() for s in self.stoppers.values())

    @property
    def reasons(self) -> dict[str, str]:
        """Stop reason per name ("" for one still running)."""
        return {name: s.reason or ("time-cap" if self.capped else "") for name, s in self.stoppers.items()}
