"""The reference's side of an evaluation's correctness rounds: which `ReferenceRounds` the check uses (kept per
task, sizes, seed and round count in the judge's `ReferenceCache`), and making them ahead of their use: while the
runner imports the candidate, and on a GPU while it runs each correctness call.

Why ahead: during the import the judge only waits for the runner's reply, and a round of a real-size KernelBench
problem (its inputs, the native output, the float64 reference) takes a fifth of a second or more on a GPU, the
import about as long. The rounds are the judge's own work on trusted inputs; nothing of the candidate takes part.

How many: until the runner answers, since a round made after that only delays the reply (the check would make it
next anyway) and a candidate that failed to import needs none. On an H100 that made one round of KernelBench L2/1's
five ahead and none of L2/12's. A CUDA build announces its compile pause as it starts, so none are made beside it
yet, though the build takes tens of seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench.eval.judge import trace
from workbench.eval.judge.reference.rounds import ReferenceRounds
from workbench.eval.wire.tensors import release_unused

if TYPE_CHECKING:
    from workbench.eval.judge.evaluation import Evaluation


def plan(ev: Evaluation) -> tuple[list[dict[str, Any]], int]:
    """The evaluation `ev`'s checked sizes (made safe for the CPU) and the number of rounds it asks for."""
    return [ev._cpu_safe(s) for s in ev.job.check_sizes], ev.job.rounds


def rounds_key(ev: Evaluation) -> tuple[Any, ...]:
    """What the rounds of the evaluation `ev` are kept under."""
    sizes, rounds = plan(ev)
    return (ev.key, repr([sorted(s.items()) for s in sizes]), ev.seed, ev.device, rounds)


def rounds_for(ev: Evaluation) -> tuple[ReferenceRounds, bool]:
    """The rounds for `ev`, and whether an earlier evaluation made them (this one, having made them ahead, says no:
    the Result's `reference_cache` is "miss")."""
    sizes, rounds = plan(ev)
    reference, cached = ev.ctx.rounds.get(rounds_key(ev), lambda budget: ReferenceRounds.create(
        ev.reference(), ev.device, sizes, ev.seed, ev.task.tolerance, ev.task.distributions, rounds, budget),
        ev.device)
    ev.rounds_made_here = ev.rounds_made_here or not cached
    return reference, cached and not ev.rounds_made_here


def make_ahead(ev: Evaluation) -> None:
    """While the runner imports `ev`'s candidate: its rounds, one at a time, until the runner answers (a reply, or a
    compile pause it waits on) or every round is made (Result.protocol["reference_rounds_ahead"] counts them). Only
    rounds the judge keeps are worth making ahead, so a task too large to keep them stops after the first. Best
    effort: whatever fails here is forgotten and happens again in the check, which reports it in its own stage."""
    runner = ev.session.runner
    try:
        reference, cached = rounds_for(ev)
        if cached:
            return
        r = 0
        while reference.keep and r < reference.n and not runner.answers_within(0):
            with trace.span("reference round ahead", round=r):
                made = reference.round(r)
            r += 1
            if not reference.keep and reference.hold_ahead(made):  # too large to keep: the check takes this one
                ev.held_rounds = reference  # let go when the evaluation ends without a check
        ev.diagnostics.reference_rounds_ahead = r
    except Exception:  # noqa: BLE001 - made again, and reported, by the check
        ev.ctx.rounds.discard(rounds_key(ev))
        release_unused(ev.device)


def ahead_of_calls(ev: Evaluation, reference: ReferenceRounds) -> Callable[[], None] | None:
    """On a GPU, the judge's work while the runner runs one of the check's calls (`CandidateSession.between_calls`):
    the next rounds not made yet, one at a time, until the runner answers (a task too large to keep its rounds: the
    next one only, held until its turn, `ReferenceRounds.pending`). None on the CPU, where the judge's work would
    take the cores the runner's call runs on.

    Why: a round is made just before its first call needs it, and the check's calls and rounds took turns
    (KernelBench L2/1 on an H100: 0.56 s of rounds and 0.51 s of calls, one after the other), while the first call
    of each shape in a fresh runner spends most of its time loading that shape's library kernels, not on the GPU.
    A round that fails here is forgotten and made again when its call comes, which reports the failure there.
    Result.protocol["reference_rounds_during_calls"] counts the rounds made this way."""
    if not ev.device.startswith("cuda"):
        return None
    runner = ev.session.runner
    diag = ev.diagnostics
    failed: list[bool] = []

    def make() -> None:
        while not failed and not runner.answers_within(0):
            r = reference.pending()
            if r is None:
                return
            try:
                with trace.span("reference round during a call", round=r):
                    reference.prepare(r)
            except Exception:  # noqa: BLE001 - made again, and reported, when its call comes
                failed.append(True)
                release_unused(ev.device)
                return
            diag.reference_rounds_during_calls = (diag.reference_rounds_during_calls or 0) + 1

    return make
