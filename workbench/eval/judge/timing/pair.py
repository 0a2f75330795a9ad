"""Timing across the trust boundary (docs/trust-boundary.md, time): candidate and reference (its own runner on a GPU,
else the judge) in alternating batches on inputs the judge rewrites between rounds; a few timed outputs re-checked
(`result-cache`), samples held to the judge's clock (`clock_check`); stops per `stopping_rule` or a settled verdict."""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from workbench.eval.checks.flags import Finding
from workbench.eval.checks.runtime import CpuBatch
from workbench.eval.judge import verdict
from workbench.eval.judge.correctness import recheck as recheck_compare
from workbench.eval.judge.reference.runner import ReferenceRunner, ReferenceRunnerFailed
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing import clock_check
from workbench.eval.judge.timing import outcome as timing_outcome
from workbench.eval.judge.timing.batches import Calibration, copy_out_mirrored, judge_batch
from workbench.eval.judge.timing.clock_check import Batch
from workbench.eval.judge.timing.inputs import InputPool
from workbench.eval.judge.timing.outcome import PAIR, TimingOutcome
from workbench.eval.judge.timing.placement import Frozen, OneCore
from workbench.eval.judge.timing.stats import JointStopper, StoppingRule, _rel_width
from workbench.eval.wire import timed_loop
from workbench.eval.wire.tensors import as_list, is_plain, release_if_short

if TYPE_CHECKING:
    from workbench.eval.judge.timing.telemetry import Telemetry
    from workbench.tasks.task import Tolerance

#: Seconds of calls one timed batch aims at, so a round's fixed costs stay a modest share.
TARGET_BATCH_S = {"cuda": 0.02, "cpu": 0.02}
#: Batches per side before the CI may stop timing (the A/B verdict needs at least verdict.MIN_AB_SAMPLES).
MIN_BATCHES = 10
#: Each side's relative 95% CI width under which a settled A/B verdict stops timing.
DECIDED_REL_CI = 0.04
#: Seconds and batches per side a capped GPU timing with the speedup inconclusive may go on to (`_worth_more`).
EXTENDED_CAP_S, EXTENDED_MAX_BATCHES = 6.0, 600
#: Batches per side a GPU timing goes on to when both CIs met their targets with the speedup inconclusive (`_settle`).
SETTLE_BATCHES = 30
#: Calls checked per round after the first three (which check every call).
CHECKS_PER_BATCH = 2
#: Timed calls on Triton's interpreter (its time decides no verdict), each a batch on the same input set refreshed in
#: place and its output re-checked: the second finds a result kept by address stale.
INTERPRETED_CALLS = 2


def stopping_rule(device: str, interpreted: bool, calls: int | None) -> StoppingRule:
    """A fixed count where asked for or on the interpreter; else until both CIs meet their target or the budget."""
    if calls is not None:
        return StoppingRule.fixed(calls)
    if interpreted:
        return StoppingRule.fixed(INTERPRETED_CALLS)
    if device.startswith("cuda"):
        return StoppingRule(target_rel_ci=0.01, min_samples=MIN_BATCHES, max_samples=200, time_cap_s=2.0,
                            plateau_batches=6)
    # The CPU wall clock is advisory (a shared host moves it by percents): a cheap, bounded budget.
    return StoppingRule(target_rel_ci=0.05, min_samples=MIN_BATCHES, max_samples=20, time_cap_s=1.5, plateau_batches=0)


@dataclass
class ReferenceSide:
    """What the judge times beside the candidate: the reference and, optionally, `torch.compile` of it."""

    model: Any
    compiled: Any = None
    tolerance: Callable[[str], Tolerance] | None = None  # the re-checks' budget, with the checks' native error
    native_error: float = 0.0
    runner: ReferenceRunner | None = None  # None: the judge times the reference in its own process


class _PhaseClock:
    """Adds the seconds since the last lap to a named phase."""

    def __init__(self, phases: dict[str, float]):
        self.phases, self.last = phases, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@dataclass
class PairTimer:
    """Times one candidate against its reference; `run()` returns the TimingOutcome."""

    session: CandidateSession
    model_id: int
    reference: ReferenceSide
    pool: InputPool
    calibration: Calibration
    rule: StoppingRule
    device: str
    clock: str
    telemetry: Telemetry | None = None
    seeded: bool = True
    rng: random.Random = field(default_factory=random.SystemRandom)

    def __post_init__(self) -> None:
        self.cuda = self.device.startswith("cuda")
        self.names = ["reference", "candidate"] + (["compiled"] if self.reference.compiled is not None else [])
        self.stream: dict[str, list[float]] = {n: [] for n in self.names}
        self.device_ms: dict[str, list[float]] = {n: [] for n in self.names}
        self.batches: list[Batch] = []
        self.cpu_batches: list[CpuBatch] = []
        self.cpu_span: tuple[Any, Any] | None = None
        self.findings: list[Finding] = []
        self.checked = self.dropped = self.compiled_calls = 0
        self.released = 0  # rounds in which the judge gave its cached GPU memory back (tight memory)
        # Uncounted rounds first (compiling, tuning, first touch, batch sizing); none on the interpreter, where nothing
        # compiles or tunes and the check already ran the candidate.
        self.warmup_rounds = 0 if self.clock == "interpreter" else 2
        self.null = self.calibration.runner
        #: Per counted batch, each side's ms per call by the judge's clock.
        self.judged: dict[str, list[float]] = {n: [] for n in PAIR}
        self.phases: dict[str, float] = {}  # seconds per part of the rounds (protocol `timing_phases`)
        self.one_core: OneCore | None = None
        self.candidate_first = 0  # counted batches in which the candidate's side went first
        self.reference_fallback = ""  # why the reference's runner was given up during timing

    @functools.cached_property
    def scratch(self) -> torch.Tensor | None:
        """The judge's output buffer for the batches it times itself."""
        like = self.pool.out_like
        return torch.empty(tuple(like.shape), dtype=like.dtype, device=self.device) \
            if copy_out_mirrored(self.pool) else None

    def run(self) -> TimingOutcome:
        self.one_core = OneCore(self.session, self.cuda, self.reference.runner)
        with self.one_core:
            return self._run()

    def _run(self) -> TimingOutcome:
        calls = 1
        if self.warmup_rounds:
            first = 1 if self.rule.is_fixed else min(self.pool.n, 2)
            self._round(0, first, count=False)
            calls = self._batch_size(self._round(1, first, count=False))
        # The compiled reference is an aside (speedup_vs_compile): it does not hold timing up.
        stopper = self.rule.start_joint(PAIR)
        fixed_left = self.rule.max_samples if self.rule.is_fixed else None
        r, decided = 2, ""
        while True:
            while not stopper.done() and not self._caught():
                # On the interpreter each timed call is a batch of its own, so every output is re-checked.
                n = calls if fixed_left is None else 1 if self.clock == "interpreter" else \
                    max(1, min(calls, (fixed_left + 1) // 2))
                self._counted_round(stopper, r, n, per_call=fixed_left is not None)
                r += 1
                if fixed_left is None and r % 2 == 0 and self._speedup_decided():
                    decided = "verdict"
                    break
                if fixed_left is not None:
                    fixed_left -= n
                    if fixed_left <= 0:
                        break
            if not decided and fixed_left is None and self._unsettled(stopper):
                r, decided = self._settle(stopper, r, calls)
            if decided or fixed_left is not None or not self._worth_more(stopper):
                break
        reasons = stopper.reasons
        if decided:
            reasons = {name: reason or "ci-target" for name, reason in reasons.items()}
        if "compiled" in self.names:
            reasons["compiled"] = "with-pair"
        return timing_outcome.outcome_of(self, reasons)

    def _unsettled(self, stopper: JointStopper) -> bool:
        """GPU: both sides met their CI targets in under SETTLE_BATCHES batches, the verdict still inconclusive."""
        if not self.cuda or self._caught() or any(r != "ci-target" for r in stopper.reasons.values()):
            return False
        return len(self._watched("candidate")) < SETTLE_BATCHES and self._paired_verdict() == "inconclusive"

    def _settle(self, stopper: JointStopper, r: int, calls: int) -> tuple[int, str]:
        """More rounds, up to SETTLE_BATCHES within the time cap, until the verdict settles (the per-round ratios
        scatter more than each side); returns (the next round, "verdict" or "")."""
        while len(self._watched("candidate")) < SETTLE_BATCHES and stopper.elapsed_s < stopper.time_cap_s and \
                not self._caught():
            self._counted_round(stopper, r, calls)
            r += 1
            if r % 2 == 0 and self._speedup_decided():
                return r, "verdict"
        return r, ""

    def _worth_more(self, stopper: JointStopper) -> bool:
        """GPU, once: on to EXTENDED_CAP_S when a bound stopped a side with the speedup inconclusive (noisy batches)."""
        if not self.cuda or self._caught() or stopper.extended or \
                not any(r in ("time-cap", "max-reps") for r in stopper.reasons.values()):
            return False
        return self._paired_verdict() == "inconclusive" and stopper.extend(EXTENDED_CAP_S, EXTENDED_MAX_BATCHES)

    def _speedup_decided(self) -> bool:
        """Settled early: MIN_BATCHES batches, each side within DECIDED_REL_CI, a verdict other than inconclusive."""
        ref, cand = self._watched("reference"), self._watched("candidate")
        return min(len(ref), len(cand)) >= MIN_BATCHES and \
            max(_rel_width(sorted(ref), 0.95), _rel_width(sorted(cand), 0.95)) <= DECIDED_REL_CI and \
            self._paired_verdict() != "inconclusive"

    def _paired_verdict(self) -> str | None:
        """The paired verdict of the rounds so far, or None before MIN_BATCHES."""
        ref, cand = self._watched("reference"), self._watched("candidate")
        return verdict.speedup(ref, cand, paired=True).verdict if min(len(ref), len(cand)) >= MIN_BATCHES else None

    def _counted_round(self, stopper: JointStopper, r: int, n: int, per_call: bool = False) -> None:
        """Round r, counted: each side's batch mean (once per call if `per_call`) goes to `stopper` with its seconds."""
        started = time.perf_counter()
        got = self._round(r, n, count=True)
        samples = {m: ([got[m]] * (n if per_call else 1) if got else []) for m in PAIR}
        stopper.add(samples, time.perf_counter() - started)

    def _watched(self, name: str) -> list[float]:
        return self.device_ms[name] if self.cuda and self._side_stream(name) else self.stream[name]

    def _caught(self) -> bool:
        return any(f.flag == "result-cache" for f in self.findings)

    def _batch_size(self, warm: dict[str, float]) -> int:
        """Calls per batch: the target batch time over the slower side's time per call in a warm-up round."""
        per_call = max([v / 1e3 for v in warm.values() if v] or [1e-3])
        target = TARGET_BATCH_S["cuda" if self.cuda else "cpu"]
        return max(1, min(self.pool.n, math.ceil(target / max(per_call, 1e-6))))

    def _round(self, b: int, n: int, count: bool) -> dict[str, float]:
        """Round b, n calls per side: each side's mean ms per call by the runners' clocks; {} if dropped (throttled)."""
        pool = self.pool
        order = list(range(n))
        self.rng.shuffle(order)
        seeds = tuple(self.rng.randrange(1 << 62) for _ in range(n)) if self.seeded else ()
        checks = set(range(n)) if b <= 2 else set(self.rng.sample(range(n), min(n, CHECKS_PER_BATCH)))
        kept: dict[int, Any] = {}
        clock = _PhaseClock(self.phases)
        before = self.telemetry.sample() if self.telemetry is not None else None
        clock.lap("telemetry")
        # Where both are runners the first side alternates, so what going first pays or gains falls on both alike.
        candidate_first = self.reference.runner is not None and b % 2 == 1
        with Frozen(self.session):
            clock.lap("freeze")
            contents = pool.refresh(self.rng, n) if b or pool.lent else []
            clock.lap("refresh")
            if self.reference.runner is not None:
                # The re-check's outputs first; then the inputs written again where the candidate goes first (the
                # reference may have written them) and on a GPU (the side right after a refresh read slower).
                self._reference_outputs(order, seeds, checks, kept)
                if contents and (self.cuda or candidate_first):
                    pool.refresh(None, seeds=contents)
                clock.lap("reference")
            if not candidate_first:
                ref_stream, ref_dev, ref_bracket, comp = self._reference_side(b, order, seeds, checks, kept)
                clock.lap("reference")
                if contents and self.cuda:  # the candidate's batch follows the same work as the reference's
                    pool.refresh(None, seeds=contents)
                    clock.lap("refresh")
        clock.lap("freeze")
        reply, bracket, worked = self._candidate_side(order, seeds)
        if candidate_first:
            clock.lap("candidate")
            with Frozen(self.session):
                clock.lap("freeze")
                if contents:
                    pool.refresh(None, seeds=contents)
                    clock.lap("refresh")
                ref_stream, ref_dev, ref_bracket, comp = self._reference_side(b, order, seeds, checks, kept)
                clock.lap("reference")
            clock.lap("freeze")
        clock.lap("candidate")
        self._recheck(b, order, kept)
        clock.lap("recheck")
        keep = True
        if self.telemetry is not None:
            keep = self.telemetry.record_batch(before, self.telemetry.sample()).ok
            clock.lap("telemetry")
        cand_stream, cand_dev = list(reply.stream_ms), list(reply.device_ms)
        ref_harness = self.null if self.reference.runner is not None else self.calibration.judge
        judged = {"reference": clock_check.judge_time(Batch(n, ref_bracket, 0.0), ref_harness) * 1e3,
                  "candidate": clock_check.judge_time(Batch(n, bracket, 0.0), self.null) * 1e3}
        if not count:  # sizes the batches: the runner's own figure, whose lie only costs the candidate precision
            return {"reference": _mean(ref_stream), "candidate": _mean(cand_stream)}
        self.batches.append(Batch(n, bracket, _mean(cand_dev if self.cuda else cand_stream) / 1e3, worked))
        self.candidate_first += candidate_first
        if not keep:
            self.dropped += 1
            return {}
        got = {"reference": (ref_stream, ref_dev), "candidate": (cand_stream, cand_dev)}
        if comp is not None:
            got["compiled"] = comp
            self.compiled_calls += n
        for name, (s, d) in got.items():
            self.stream[name].append(_mean(s))
            self.device_ms[name].append(_mean(d))
        for name, value in judged.items():
            self.judged[name].append(value)
        # The stopper watches the runner's figures (the tighter ones); whether they stand is decided at the end.
        return {name: _mean(d if self.cuda and self._side_stream(name) else s) for name, (s, d) in got.items()}

    def whole_cpu(self) -> CpuBatch | None:
        """The whole timing's CPU use over the sum of the batches' brackets (tick rounding counted once)."""
        if self.cpu_span is None:
            return None
        whole = _cpu_batch(sum(b.bracket for b in self.cpu_batches), *self.cpu_span)
        return dataclasses.replace(whole, others=sum(b.others for b in self.cpu_batches))

    def _candidate_side(self, order: list[int], seeds: tuple[int, ...]) -> tuple[Any, float, float | None]:
        """The candidate's batch in the judge's bracket and, on the CPU, the seconds the runner's threads worked in it;
        threads left running or off the timing core are findings."""
        cpu_before = self.session.runner.cpu_use() if not self.cuda else None
        reply, bracket = self.session.time(self.model_id, self.pool.pool_id, order, self.session.timeout, seeds)
        worked = None
        if cpu_before is not None:
            after = self.session.runner.cpu_use()
            used = _cpu_batch(bracket, cpu_before, after)
            self.cpu_batches.append(used)
            self.cpu_span = (self.cpu_span[0] if self.cpu_span else cpu_before, after)
            worked = used.main + used.others
        if reply.threads_left:
            self.findings.append(Finding("thread-deferral", "threads still running after a timed batch: "
                                                            f"{', '.join(reply.threads_left)}"))
        moved = self.one_core.escaped() if self.one_core is not None else []
        if moved and not any(f.flag == "harness-tamper" for f in self.findings):
            self.findings.append(Finding("harness-tamper", f"{len(moved)} thread(s) of the runner left the core the "
                                                           "timing pinned both sides to (sched_setaffinity)"))
        return reply, bracket, worked

    def _reference_side(self, b: int, order: list[int], seeds: tuple[int, ...], checks: set[int],
                        kept: dict[int, Any]) -> tuple[list[float], list[float], float, Any]:
        """The reference's batch, the compiled aside where timed, then the judge's cached memory freed if short."""
        ref_stream, ref_dev, ref_bracket = self._time_reference(order, seeds, checks, kept)
        comp = None
        if self.reference.compiled is not None and (b < 2 or b % 2 == 0 or self.rule.is_fixed):
            comp = judge_batch(lambda xs: self.reference.compiled(*xs), self.pool, order, seeds, self.scratch)[:2]
        self.released += release_if_short(self.session.device)
        return ref_stream, ref_dev, ref_bracket, comp

    def _side_stream(self, name: str) -> bool:
        return timed_loop._pick_samples(self.stream[name], self.device_ms[name])[1] > 0

    def _time_reference(self, order: list[int], seeds: tuple[int, ...], checks: set[int],
                        kept: dict[int, Any]) -> tuple[list[float], list[float], float]:
        """The reference's batch: in its own runner, or in the judge, keeping the checked calls' outputs. A runner
        that fails hands the reference to the judge from this round on."""
        runner = self.reference.runner
        if runner is not None:
            try:
                reply, bracket = runner.time(order, seeds, self.session.timeout)
                return list(reply.stream_ms), list(reply.device_ms), bracket
            except ReferenceRunnerFailed as exc:
                self.reference.runner = None
                self.reference_fallback = str(exc)
                kept.clear()

        def keep(k: int, head: torch.Tensor) -> bool:
            if k in checks:
                kept[k] = head.detach().clone()
                return True
            return False

        model = self.reference.model
        return judge_batch(lambda xs: model(*xs), self.pool, order, seeds, self.scratch, keep)

    def _reference_outputs(self, order: list[int], seeds: tuple[int, ...], checks: set[int],
                           kept: dict[int, Any]) -> None:
        """The reference's outputs of the checked calls on exactly their inputs and seeds, by the judge (untimed)."""
        with torch.no_grad():
            for k in sorted(checks):
                timed_loop.seed_rng(seeds[k] if k < len(seeds) else None)
                out = self.reference.model(*self.pool.sets[order[k]])
                head = next((t for t in as_list(out) if is_plain(t)), None)
                if head is not None:
                    kept[k] = head.detach().clone()
                del out

    def _recheck(self, b: int, order: list[int], kept: dict[int, Any]) -> None:
        """The checked calls' committed outputs against the reference's on the same inputs (`result-cache`)."""
        if not self.pool.slots:
            return
        for k, expected in sorted(kept.items()):
            self.checked += 1
            got = self.pool.slots[order[k]]
            problem = recheck_compare.mismatch(got, expected, self.reference.tolerance, self.reference.native_error)
            if problem:
                self.findings.append(Finding("result-cache", f"timed call {k + 1} of batch {b + 1} returned a wrong "
                                                             f"result for the inputs it was given ({problem})"))
                return


def _cpu_batch(bracket: float, before: Any, after: Any) -> CpuBatch:
    return CpuBatch(bracket, after.seconds - before.seconds, (after.main_ns - before.main_ns) / 1e9,
                    max(0, after.others_ns - before.others_ns) / 1e9)
