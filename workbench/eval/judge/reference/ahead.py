"""Which `ReferenceRounds` an evaluation's check uses (kept in the judge's `ReferenceCache` per task, sizes, seed and
round count), and making them ahead of their use: while the runner imports the candidate, and on a GPU while it
runs each correctness call. The judge only waits on the runner then, and the rounds are its own work on trusted
inputs. Rounds are made only until the runner answers: one made later would just delay the reply.
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
    """The rounds for `ev`, and whether an earlier evaluation made them (not this one ahead: `reference_cache` is
    then "miss")."""
    sizes, rounds = plan(ev)
    reference, cached = ev.ctx.rounds.get(rounds_key(ev), lambda budget: ReferenceRounds.create(
        ev.reference(), ev.device, sizes, ev.seed, ev.task.tolerance, ev.task.distributions, rounds, budget),
        ev.device)
    ev.rounds_made_here = ev.rounds_made_here or not cached
    return reference, cached and not ev.rounds_made_here


def make_ahead(ev: Evaluation) -> None:
    """While the runner imports `ev`'s candidate: its rounds, one at a time, until the runner answers (a reply or a
    compile pause) or all are made (`reference_rounds_ahead`); a task too large to keep them stops after the first.
    Best effort: a failure here is forgotten and happens again, reported, in the check."""
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
    """On a GPU, the judge's work while the runner runs a check's call (`CandidateSession.between_calls`): the next
    rounds not made yet until the runner answers (`ReferenceRounds.pending`), so rounds and calls overlap instead of
    taking turns; counted in `reference_rounds_during_calls`. None on the CPU, whose cores the runner's call needs.
    A round that fails here is made again, and reported, when its call comes."""
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
