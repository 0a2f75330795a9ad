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

import copy
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval import guards, stats, timing
from workbench.eval.compare import compare
from workbench.eval.correctness import HOST64_BYTES, reference64
from workbench.eval.findings import Finding
from workbench.eval.session import CandidateSession
from workbench.eval.stats import StoppingRule
from workbench.eval.tensors import as_list, clone_inputs, is_plain
from workbench.result import Timing

#: Reps per timed batch (GPU). Batches alternate reference and candidate.
GPU_BATCH = 20
#: Reps per timed batch on the CPU (alternating 6 and 3 reps: 30 samples a side take seven batches).
CPU_BATCH = 6
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

    def __init__(self, session: CandidateSession, ref: Any, size: dict, seed: int, device: str,
                 copies: int | None):
        self.ref, self.size, self.seed, self.device = ref, size, seed, device
        first = ref.make_inputs(size, seed + 101, device, "default")
        if copies is None:  # as many rotated sets as fit (each exists twice: the judge's copy and the shared one)
            copies = default_copies(_nbytes(first), _free_bytes(device))
        self.copies = copies
        self.judge = [first] + [ref.make_inputs(size, seed + 101 * (k + 1), device, "default")
                                for k in range(1, copies)]
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


class _OneCore:
    """CPU timing: the judge's timing thread and every thread of the runner on one core for the whole timing.

    They take turns (the runner is frozen while the reference runs, the judge waits while the candidate runs), so
    one core costs nothing, and both sides then see the same core's caches and clock instead of whichever core the
    scheduler gave each (on a shared 2-core machine identical code read 0.6x-1.3x from one evaluation to the
    next). A runner that moves itself elsewhere gains nothing it may keep: more than one thread is `thread-use`."""

    def __init__(self, session: CandidateSession, cuda: bool):
        self.session, self.active = session, not cuda and hasattr(os, "sched_setaffinity")
        self.saved: set[int] | None = None

    def __enter__(self) -> None:
        if not self.active:
            return
        try:
            self.saved = os.sched_getaffinity(0)
            core = {min(self.saved)}
            os.sched_setaffinity(0, core)
            for pid in self.session.runner.members():
                for tid in os.listdir(f"/proc/{pid}/task"):
                    os.sched_setaffinity(int(tid), core)
        except OSError:  # not permitted here: time unpinned
            pass

    def __exit__(self, *exc: Any) -> bool:
        if self.saved is not None:
            try:
                os.sched_setaffinity(0, self.saved)
            except OSError:
                pass
        return False


def stopping_rule(device: str, interpreted: bool, reps: int | None) -> StoppingRule:
    """Fixed counts where the user asked for one or on the interpreter (too slow to iterate); elsewhere: until the
    95% CI of the median is within 1% (at least 50 runs on a GPU, 30 on the CPU wall clock), or a cap."""
    if reps is not None:
        return StoppingRule.fixed(reps)
    if interpreted:
        return StoppingRule.fixed(5)
    if device.startswith("cuda"):
        return StoppingRule(target_rel_ci=0.01, min_samples=50, max_samples=1000, time_cap_s=5.0)
    return StoppingRule.fixed(30)  # the CPU wall clock: compiled torch code, a fixed, cheap count


def time_pair(session: CandidateSession, model_id: int, ref_model: Any, compiled: Any, ref: Any, *, size: dict,
              seed: int, device: str, clock: str, warmup: int, rule: StoppingRule, tolerance: Any,
              copies: int | None = None, launch_gaps: bool = True, telemetry: Any = None) -> TimingOutcome:
    """Time candidate and reference interleaved (module docstring); every check's finding is in the outcome."""
    with _OneCore(session, device.startswith("cuda")):
        return _time_pair(session, model_id, ref_model, compiled, ref, size=size, seed=seed, device=device,
                          clock=clock, warmup=warmup, rule=rule, tolerance=tolerance, copies=copies,
                          launch_gaps=launch_gaps, telemetry=telemetry)


def _time_pair(session: CandidateSession, model_id: int, ref_model: Any, compiled: Any, ref: Any, *, size: dict,
               seed: int, device: str, clock: str, warmup: int, rule: StoppingRule, tolerance: Any,
               copies: int | None, launch_gaps: bool, telemetry: Any) -> TimingOutcome:
    cuda = device.startswith("cuda")
    inputs = _Inputs(session, ref, size, seed, device, copies)
    copies = inputs.copies
    with torch.no_grad():
        probe = as_list(ref_model(*clone_inputs(inputs.judge[0])))
    first = next((t for t in probe if is_plain(t)), None)
    # The CPU alternates small batches too: one batch per side let a shared machine's drift land on one side only.
    batch = GPU_BATCH if cuda else CPU_BATCH
    if rule.is_fixed and rule.max_samples <= batch:
        # A small fixed count (the interpreter's 5) would fit one batch, and one batch has no in-place refresh of
        # the inputs: split it so a result cached by address or by shape meets new values before it is checked.
        batch = max(1, (rule.max_samples + 1) // 2)
    per_rep_slots = first is not None and _nbytes([first]) * batch <= COMMIT_BUDGET_BYTES
    outcome = TimingOutcome(candidate=None, reference=None)  # type: ignore[arg-type]
    rng = random.SystemRandom()
    names = ["reference", "candidate"] + (["compiled"] if compiled is not None else [])
    stopper = rule.start_joint(names)
    stream: dict[str, list[float]] = {n: [] for n in names}
    dev: dict[str, list[float]] = {n: [] for n in names}
    clocks = _Clocks()
    model64: list[Any] = []
    checked = dropped = 0
    cpu_batches: list[tuple[float, float, int]] = []
    # Slots are made once: buffers are mapped by the runner in the first batch only (outside later brackets).
    slots: list[tuple[torch.Tensor, Any]] = []
    if first is not None:
        for _ in range(batch if per_rep_slots else copies):
            slots.append(session.arena.tensor(tuple(first.shape), first.dtype))
    # The reference pays the same per-rep copy of its output outside the window as the candidate's commit does
    # (on the CPU the copy evicts cache lines the next rep would have found).
    scratch = torch.empty_like(first) if slots else None

    def mirror_commit(_k: int, out: Any) -> None:
        head = out[0] if isinstance(out, (tuple, list)) else out
        if scratch is not None and type(head) is torch.Tensor and head.shape == scratch.shape:
            scratch.copy_(head)

    b = 0
    while not stopper.done():
        # Batch sizes alternate (full, half) so the judge's clock can separate per-call from per-batch costs.
        size = batch if b % 2 == 0 else max(1, batch // 2)
        count = min(size, max(1, max(s.remaining for s in stopper.stoppers.values())))
        if b:
            inputs.refresh()
        order = _shuffled_rotation(count, copies, rng)
        # Both sides seed the RNG before each rep with the same value, so the re-check of a rep recomputes the
        # reference with the draws its timed call made (a forward may draw random numbers, as KernelBench's LSTM).
        seeds = tuple(rng.randrange(1 << 62) for _ in range(count))
        batch_warmup = warmup if b == 0 else 1
        before = telemetry.sample() if telemetry is not None else None
        started = time.perf_counter()
        got: dict[str, tuple[list[float], list[float]]] = {}
        with _frozen(session):
            t0 = time.perf_counter()
            got["reference"] = timing.time_batch(lambda xs: ref_model(*xs), inputs.judge, order, device=device,
                                                 warmup=batch_warmup, after_rep=mirror_commit, seeds=seeds)
            ref_elapsed = time.perf_counter() - t0
            clocks.reference.append((count + batch_warmup, ref_elapsed, sum(got["reference"][1]) / 1e3, count))
            if compiled is not None:
                got["compiled"] = timing.time_batch(lambda xs: compiled(*xs), inputs.judge, order, device=device,
                                                    warmup=batch_warmup, seeds=seeds)
        commit: list[Any] = []
        if slots:
            commit = [slots[k if per_rep_slots else order[k]][1] for k in range(count)]
            if not per_rep_slots:  # only the last rep on each set survives in its slot
                last = {order[k]: k for k in range(count)}
                commit = [ref_k if last[order[k]] == k else None for k, ref_k in enumerate(commit)]
        before_cpu = session.runner.cpu_use() if not cuda else None
        reply, bracket = session.time(model_id, inputs.refs, order, batch_warmup, commit, False,
                                      timeout=session.timeout, seeds=seeds)
        if before_cpu is not None:
            after_cpu = session.runner.cpu_use()
            cpu_batches.append((bracket, after_cpu.seconds - before_cpu.seconds, after_cpu.threads))
        got["candidate"] = (list(reply.stream_ms), list(reply.device_ms))
        clocks.candidate.append((count + batch_warmup, bracket, sum(reply.device_ms) / 1e3, count))
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
        if slots and (b < 2 or rng.random() < 0.25):
            for k in _reps_to_check(order, commit, rng):
                checked += 1
                slot = slots[k if per_rep_slots else order[k]][0]
                finding = _check_committed(slot, inputs.judge[order[k]], ref_model, tolerance, b, k, model64,
                                           seeds[k])
                if finding:
                    outcome.findings.append(finding)
                    break
        b += 1
        if any(f.flag == "result-cache" for f in outcome.findings):
            break
    if slots:
        clocks.commit_s = _copy_seconds(first, slots[0][0])
    outcome.findings += clocks.findings()
    outcome.findings += guards.judge_cpu_share(cpu_batches)
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


def _shuffled_rotation(count: int, copies: int, rng: random.SystemRandom) -> list[int]:
    """`count` input-set indices in blocks that each hold every set once, in random order: a batch of at least
    `copies` reps meets every set (drawing each rep at random put all 5 interpreter reps on one set 1 time in 81,
    where a result cached by shape is right), and the runner still cannot tell which set comes next."""
    order: list[int] = []
    while len(order) < count:
        block = list(range(copies))
        rng.shuffle(block)
        order += block
    return order[:count]


def _reps_to_check(order: list[int], commit: list[Any], rng: random.SystemRandom) -> list[int]:
    """The last committed rep on every input set of the batch, plus one other committed rep at random."""
    committed = [k for k in range(len(order)) if not commit or commit[k] is not None]
    last = {order[k]: k for k in committed}
    picks = set(last.values())
    if committed:
        picks.add(rng.choice(committed))
    return sorted(picks)


def _check_committed(slot: torch.Tensor, inputs: list[Any], ref_model: Any, tolerance: Any, batch: int,
                     rep: int, model64: list[Any], seed: int) -> Finding | None:
    timing.seed_rng(seed)
    with torch.no_grad():
        native = ref_model(*clone_inputs(inputs))
    host = slot.is_cuda and _nbytes(inputs) + _nbytes([slot]) > HOST64_BYTES  # as the correctness protocol does
    if not model64:  # the float64 copy of the reference, made once per timing
        m = copy.deepcopy(ref_model)
        if host and isinstance(m, torch.nn.Module):
            m = m.cpu()
        model64.append(m.double() if isinstance(m, torch.nn.Module) else m)
    args = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs] if host else inputs
    ref64 = reference64(ref_model, args, [], model64[0], native=native, seed=seed)
    expected = as_list(native)[0]
    cmp = compare(slot.to(expected.device, copy=True), ref64[0], expected, tolerance)
    if cmp.ok:
        return None
    what = "; ".join(d for _, d in cmp.flags)[:300]
    return Finding("result-cache", f"timed call {rep + 1} of batch {batch + 1} returned a wrong result for the inputs "
                                   f"it was given ({what})")


def _copy_seconds(like: torch.Tensor, slot: torch.Tensor) -> float:
    """What committing one output costs: one copy of an output-sized tensor into a slot of the same kind."""
    src = torch.empty_like(like)
    cuda = src.is_cuda or slot.is_cuda
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        slot.copy_(src)
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / 3


def _fit(points: list[tuple[int, float]]) -> tuple[float, float, float] | None:
    """Least-squares (intercept, slope, standard error of the slope) of seconds against calls; None unless there
    are three points and two different batch sizes."""
    xs = [x for x, _ in points]
    if len(points) < 3 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    intercept = my - slope * mx
    residual = sum((y - intercept - slope * x) ** 2 for x, y in points)
    se = (residual / (len(points) - 2) / sxx) ** 0.5
    return intercept, slope, se


@dataclass
class _Clocks:
    """The judge's own clock around every batch: (calls incl. warm-up, elapsed s, reported s, timed reps)."""

    reference: list[tuple[int, float, float, int]] = field(default_factory=list)
    candidate: list[tuple[int, float, float, int]] = field(default_factory=list)
    commit_s: float = 0.0

    def findings(self) -> list[Finding]:
        """timer-patch when the reported times cannot be what the judge's clock saw:
        - more time reported than elapsed in any batch (a hard bound);
        - with batches of two sizes, the per-call cost the judge's clock shows (slope of elapsed against calls,
          less the harness's per-call overhead measured the same way on the reference, less one commit copy) is far
          above the reported per-call time: fixed costs (messages, staging, warm-up) cancel out in the slope;
        - with one batch (the CPU), what the reports leave unexplained is most of the batch."""
        for _calls, elapsed, reported, _reps in self.candidate:
            if reported > elapsed * 1.02 + 5e-4:
                return [Finding("timer-patch", f"the runner reported {reported * 1e3:.3f} ms of work in a batch the "
                                               f"judge's clock measured at {elapsed * 1e3:.3f} ms")]
        # The first batch carries the long warm-up and every first-time cost (caches, lazy set-up): left out of the
        # slopes where enough batches remain, or it alone would tilt them.
        skip = 1 if len(self.candidate) >= 4 and len(self.reference) >= 4 else 0
        cand_fit = _fit([(c, e) for c, e, _, _ in self.candidate[skip:]])
        ref_fit = _fit([(c, e) for c, e, _, _ in self.reference[skip:]])
        reported_call = sum(r for _, _, r, _ in self.candidate) / max(1, sum(n for *_, n in self.candidate))
        if cand_fit and ref_fit:
            ref_call = sum(r for _, _, r, _ in self.reference) / max(1, sum(n for *_, n in self.reference))
            harness = max(0.0, ref_fit[1] - ref_call)
            seen = cand_fit[1] - harness - self.commit_s
            # Both slopes are estimates: a few ms of scheduling noise per batch over a difference of a few calls
            # is a large per-call uncertainty for a tiny op, so the excess must also clear three standard errors.
            noise = 3 * (cand_fit[2] ** 2 + ref_fit[2] ** 2) ** 0.5
            if seen > 2 * reported_call + 3e-4 + noise:
                return [Finding("timer-patch", f"by the judge's clock a timed call costs {seen * 1e3:.3f} ms beyond "
                                               f"the harness, but the runner reported {reported_call * 1e3:.3f} ms")]
            return []
        if len(self.candidate) == 1 and self.reference:
            calls, elapsed, reported, reps = self.candidate[0]
            r_calls, r_elapsed, r_reported, r_reps = self.reference[0]
            harness = max(0.0, r_elapsed - r_reported * r_calls / r_reps) / r_calls
            explained = reported * calls / reps + calls * (harness + self.commit_s) + 0.02
            unaccounted = elapsed - explained
            # Scheduling noise on a busy host is tens of ms per batch but not per call: ask for both.
            if unaccounted > 0.5 * elapsed and unaccounted > 0.05 and unaccounted / calls > 2e-3:
                return [Finding("timer-patch", f"a timed batch took {elapsed * 1e3:.1f} ms by the judge's clock but "
                                               f"the runner reported {reported * 1e3:.1f} ms of work; "
                                               f"{unaccounted * 1e3:.1f} ms are unaccounted for")]
        return []


def _free_bytes(device: str) -> int | None:
    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def default_copies(input_bytes: int | None, free_bytes: int | None) -> int:
    """How many rotated input sets fit: three, fewer when one set is a large share of free memory (each set exists
    twice: the judge's copy and the shared one)."""
    if not input_bytes or not free_bytes:
        return 3
    fit = int(free_bytes * 0.35 // max(2 * input_bytes, 1))
    return max(1, min(3, fit))

