"""Timing across the trust boundary: the candidate is timed in its runner, the reference in the judge, in
alternating batches on the same inputs, and the judge checks what the runner reports (DESIGN.md section 3).

One round of a timed batch pair:
1. (after the first) every input set gets new values in place, in the judge's copy and in the shared copy, so a
   result cached by address or content goes stale;
2. the runner is frozen (SIGSTOP to every process in it) and the judge times the reference (eager, and compiled
   when asked) with the same loop the runner uses (`timing.time_batch`): nothing of the candidate's runs beside it;
3. the runner times the candidate; after each rep it copies the output into a slot the judge owns, and the judge
   brackets the whole batch with its own clock;
4. the judge recomputes the reference for one randomly chosen rep and compares the committed output with it
   (`result-cache` when it is wrong): the runner cannot tell which rep will be checked, so a candidate that is only
   honest while checked is caught;
5. the reported times must fit the judge's bracket: more time reported than elapsed, or far less than the bracket
   can account for once the harness's own overhead (measured on the reference's batch) is subtracted, is
   `timer-patch`.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval import stats, timing
from workbench.eval.compare import compare
from workbench.eval.correctness import reference64
from workbench.eval.findings import Finding
from workbench.eval.session import CandidateSession
from workbench.eval.stats import StoppingRule
from workbench.eval.tensors import as_list, clone_inputs, is_plain
from workbench.result import Timing

#: Reps per timed batch (GPU). Batches alternate reference and candidate.
GPU_BATCH = 20
#: Largest total size of the per-rep output slots of one batch; above it one slot per input set is used (only the
#: last rep on each set is committed, and only those can be checked).
COMMIT_BUDGET_BYTES = 512 << 20
#: Reps of the extra batches that time both sides with the host's launch gaps included (KernelBench's way).
LAUNCH_GAP_REPS = 20


@dataclass
class TimingOutcome:
    candidate: Timing
    reference: Timing
    compiled: Timing | None = None
    launch_candidate: Timing | None = None
    launch_reference: Timing | None = None
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    protocol: dict[str, Any] = field(default_factory=dict)


def _nbytes(outputs: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in outputs if isinstance(t, torch.Tensor))


class _Inputs:
    """The timing input sets: the judge's own copies (the reference is timed on them) and the shared copies the
    runner times the candidate on, with the same values; refreshed in place between batches."""

    def __init__(self, session: CandidateSession, ref: Any, size: dict, seed: int, device: str, copies: int):
        self.ref, self.size, self.seed, self.device = ref, size, seed, device
        self.judge = [ref.make_inputs(size, seed + 101 * (k + 1), device, "default") for k in range(copies)]
        self.shared, self.refs = [], []
        for inputs in self.judge:
            pairs = [session.share_arg(x) for x in inputs]
            self.refs.append(tuple(p[0] for p in pairs))
            self.shared.append([p[1] for p in pairs])
        self.generation = 0

    def refresh(self) -> None:
        self.generation += 1
        for k, (mine, theirs) in enumerate(zip(self.judge, self.shared, strict=True)):
            fresh = self.ref.make_inputs(self.size, self.seed + 7001 + 31 * k + 997 * self.generation, self.device,
                                         "default")
            for a, b, new in zip(mine, theirs, fresh, strict=False):
                if isinstance(a, torch.Tensor):
                    a.copy_(new)
                    b.copy_(new)


def _frozen(session: CandidateSession):
    class _Freeze:
        def __enter__(self) -> None:
            session.runner.freeze()

        def __exit__(self, *exc: Any) -> bool:
            session.runner.thaw()
            return False

    return _Freeze()


def stopping_rule(device: str, interpreted: bool, reps: int | None) -> StoppingRule:
    """Fixed counts where the user asked for one or on the interpreter (too slow to iterate); elsewhere: until the
    95% CI of the median is within 1% (at least 50 runs on a GPU, 30 on the CPU wall clock), or a cap."""
    if reps is not None:
        return StoppingRule.fixed(reps)
    if interpreted:
        return StoppingRule.fixed(5)
    if device.startswith("cuda"):
        return StoppingRule(target_rel_ci=0.01, min_samples=50, max_samples=2000, time_cap_s=8.0)
    return StoppingRule.fixed(30)  # the CPU wall clock: compiled torch code, a fixed, cheap count


def time_pair(session: CandidateSession, model_id: int, ref_model: Any, compiled: Any, ref: Any, *, size: dict,
              seed: int, device: str, clock: str, warmup: int, rule: StoppingRule, tolerance: Any, copies: int = 3,
              launch_gaps: bool = True, telemetry: Any = None) -> TimingOutcome:
    """Time candidate and reference interleaved (module docstring); every check's finding is in the outcome."""
    cuda = device.startswith("cuda")
    inputs = _Inputs(session, ref, size, seed, device, copies)
    with torch.no_grad():
        probe = as_list(ref_model(*clone_inputs(inputs.judge[0])))
    first = next((t for t in probe if is_plain(t)), None)
    batch = GPU_BATCH if cuda else rule.max_samples  # the CPU times its few reps in one batch
    per_rep_slots = first is not None and _nbytes([first]) * batch <= COMMIT_BUDGET_BYTES
    outcome = TimingOutcome(candidate=None, reference=None)  # type: ignore[arg-type]
    rng = random.SystemRandom()
    names = ["reference", "candidate"] + (["compiled"] if compiled is not None else [])
    stopper = rule.start_joint(names)
    stream: dict[str, list[float]] = {n: [] for n in names}
    dev: dict[str, list[float]] = {n: [] for n in names}
    brackets: list[tuple[float, float, int]] = []  # (candidate bracket s, reported s, calls)
    overhead: list[float] = []  # the judge's own harness overhead per rep (s), measured on the reference
    checked = dropped = 0
    # Slots are made once: buffers are mapped by the runner in the first batch only (outside later brackets).
    slots: list[tuple[torch.Tensor, Any]] = []
    if first is not None:
        for _ in range(batch if per_rep_slots else copies):
            slots.append(session.arena.tensor(tuple(first.shape), first.dtype))
    b = 0
    while not stopper.done():
        count = min(batch, max(1, max(s.remaining for s in stopper.stoppers.values())))
        if b:
            inputs.refresh()
        order = [(rng.randrange(copies) + j) % copies for j in range(count)]
        batch_warmup = warmup if b == 0 else (1 if cuda else 0)
        before = telemetry.sample() if telemetry is not None else None
        started = time.perf_counter()
        got: dict[str, tuple[list[float], list[float]]] = {}
        with _frozen(session):
            t0 = time.perf_counter()
            got["reference"] = timing.time_batch(lambda xs: ref_model(*xs), inputs.judge, order, device=device,
                                                 warmup=batch_warmup)
            ref_elapsed = time.perf_counter() - t0
            overhead.append(max(0.0, ref_elapsed - sum(got["reference"][1]) / 1e3 * (1 + batch_warmup / count))
                            / count)
            if compiled is not None:
                got["compiled"] = timing.time_batch(lambda xs: compiled(*xs), inputs.judge, order, device=device,
                                                    warmup=batch_warmup)
        commit: list[Any] = []
        if slots:
            commit = [slots[k if per_rep_slots else order[k]][1] for k in range(count)]
            if not per_rep_slots:  # only the last rep on each set survives in its slot
                last = {order[k]: k for k in range(count)}
                commit = [ref_k if last[order[k]] == k else None for k, ref_k in enumerate(commit)]
        reply, bracket = session.time(model_id, inputs.refs, order, batch_warmup, commit, False,
                                      timeout=session.timeout)
        got["candidate"] = (list(reply.stream_ms), list(reply.device_ms))
        brackets.append((bracket, sum(reply.device_ms) / 1e3, count + batch_warmup))
        if reply.threads_left:
            outcome.findings.append(Finding("thread-deferral", "threads still running after a timed batch: "
                                                               f"{', '.join(reply.threads_left)}"))
        keep = True
        if telemetry is not None:
            keep = telemetry.record_batch(before, telemetry.sample()).ok
        if keep:
            for name in names:
                stream[name].extend(got[name][0])
                dev[name].extend(got[name][1])
            stopper.add({name: got[name][1] if cuda else got[name][0] for name in names},
                        time.perf_counter() - started)
        else:
            dropped += 1
            stopper.add({name: [] for name in names}, time.perf_counter() - started)
        # Committed outputs: every input set of the batch in the first batches, then at random (the runner cannot
        # tell which batches are checked).
        if slots and (b < 3 or rng.random() < 0.3):
            for k in _reps_to_check(order, commit, rng):
                checked += 1
                slot = slots[k if per_rep_slots else order[k]][0]
                finding = _check_committed(slot, inputs.judge[order[k]], ref_model, tolerance, b, k)
                if finding:
                    outcome.findings.append(finding)
                    break
        b += 1
        if any(f.flag == "result-cache" for f in outcome.findings):
            break
    outcome.findings += _bracket_findings(brackets, overhead, dev["candidate"])
    if launch_gaps and cuda:
        order = [j % copies for j in range(LAUNCH_GAP_REPS)]
        with _frozen(session):
            _, d = timing.time_batch(lambda xs: ref_model(*xs), inputs.judge, order, device=device, warmup=1,
                                     launch_gaps=True)
        outcome.launch_reference = stats.summarize(d, clock, stop_reason="fixed")
        reply, _ = session.time(model_id, inputs.refs, order, 1, [], True, timeout=session.timeout)
        outcome.launch_candidate = stats.summarize(list(reply.device_ms), clock, stop_reason="fixed")
    reasons = stopper.reasons
    for name in names:
        if not stream[name]:
            continue
        chosen, side_runs = timing._pick_samples(stream[name], dev[name]) if cuda else (stream[name], 0)
        setattr(outcome, name, stats.summarize(chosen, clock, side_runs, stop_reason=reasons.get(name, "")))
    if outcome.candidate is None:
        raise RuntimeError("every timed batch was dropped (the GPU was throttled throughout)")
    if outcome.candidate.side_stream_runs:
        outcome.findings.append(Finding("side-stream", f"{outcome.candidate.side_stream_runs} of "
                                                       f"{outcome.candidate.n} timed runs had work on another stream; "
                                                       "timed to the device synchronize"))
    outcome.protocol.update(timing_input_copies=copies, checked_timed_calls=checked, dropped_batches=dropped,
                            committed_slots="per-rep" if per_rep_slots else "per-input-set", timed_batches=b)
    return outcome


def _reps_to_check(order: list[int], commit: list[Any], rng: random.SystemRandom) -> list[int]:
    """The last committed rep on every input set of the batch, plus one other committed rep at random."""
    committed = [k for k in range(len(order)) if not commit or commit[k] is not None]
    last = {order[k]: k for k in committed}
    picks = set(last.values())
    if committed:
        picks.add(rng.choice(committed))
    return sorted(picks)


def _check_committed(slot: torch.Tensor, inputs: list[Any], ref_model: Any, tolerance: Any, batch: int,
                     rep: int) -> Finding | None:
    with torch.no_grad():
        native = ref_model(*clone_inputs(inputs))
    ref64 = reference64(ref_model, inputs, [], native=native)
    cmp = compare(slot.clone(), ref64[0], as_list(native)[0], tolerance)
    if cmp.ok:
        return None
    what = "; ".join(d for _, d in cmp.flags)[:300]
    return Finding("result-cache", f"timed call {rep + 1} of batch {batch + 1} returned a wrong result for the inputs "
                                   f"it was given ({what})")


def _bracket_findings(brackets: list[tuple[float, float, int]], overhead: list[float],
                      device_ms: list[float]) -> list[Finding]:
    """Reported times must fit the judge's own clock: never more than elapsed, and not so much less that the
    harness's overhead (measured on the reference) plus a generous allowance cannot explain the rest."""
    if not brackets:
        return []
    per_rep_overhead = sorted(overhead)[len(overhead) // 2] if overhead else 0.0
    median_call = sorted(device_ms)[len(device_ms) // 2] / 1e3 if device_ms else 0.0
    for bracket, reported, calls in brackets:
        if reported > bracket * 1.02 + 5e-4:
            return [Finding("timer-patch", f"the runner reported {reported * 1e3:.3f} ms of work in a batch the "
                                           f"judge's clock measured at {bracket * 1e3:.3f} ms")]
        # Warm-up calls, commit copies (at most one call's time each) and messaging are not in the samples.
        expected = reported + calls * (median_call * 2 + per_rep_overhead) + 0.02
        unaccounted = bracket - expected
        if unaccounted > 0.3 * bracket and unaccounted / calls > max(1e-3, 3 * per_rep_overhead):
            return [Finding("timer-patch", f"a timed batch took {bracket * 1e3:.1f} ms by the judge's clock but the "
                                           f"runner reported {reported * 1e3:.1f} ms of work; "
                                           f"{unaccounted * 1e3:.1f} ms are unaccounted for")]
    return []


def default_copies(input_bytes: int | None, free_bytes: int | None) -> int:
    """How many rotated input sets fit: three, fewer when one set is a large share of free memory (each set exists
    twice: the judge's copy and the shared one)."""
    if not input_bytes or not free_bytes:
        return 3
    fit = int(free_bytes * 0.35 // max(2 * input_bytes, 1))
    return max(1, min(3, fit))

