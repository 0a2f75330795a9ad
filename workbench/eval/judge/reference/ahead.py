"""Which `ReferenceRounds` an evaluation's check uses, and making them ahead of their use: while the runner imports
the candidate, and on a GPU while it runs each correctness call, when the judge would only wait on it. A round is
made only until the runner answers: one made later would delay the reply (benchmarks/README.md has the figures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench.eval.judge.reference.rounds import ReferenceRounds
from workbench.eval.wire.tensors import release_unused

if TYPE_CHECKING:
    from workbench.eval.judge.evaluation import Evaluation


def plan(ev: Evaluation) -> tuple[list[dict[str, Any]], int]:
    """`ev`'s checked sizes (made safe for the CPU) and the number of rounds it asks for."""
    return [ev._cpu_safe(s) for s in ev.job.check_sizes], ev.job.rounds


def rounds_key(ev: Evaluation) -> tuple[Any, ...]:
    sizes, rounds = plan(ev)
    return (ev.key, repr([sorted(s.items()) for s in sizes]), ev.seed, ev.device, rounds)


def rounds_for(ev: Evaluation) -> tuple[ReferenceRounds, bool]:
    """The rounds for `ev`, and whether an earlier evaluation made them (not this one, ahead)."""
    sizes, rounds = plan(ev)
    reference, cached = ev.ctx.rounds.get(rounds_key(ev), lambda budget: ReferenceRounds.create(
        ev.reference(), ev.device, sizes, ev.seed, ev.task.tolerance, ev.task.distributions, rounds, budget), ev.device)
    ev.rounds_made_here = ev.rounds_made_here or not cached
    return reference, cached and not ev.rounds_made_here


def make_ahead(ev: Evaluation) -> None:
    """While the runner imports `ev`'s candidate: its rounds, one at a time, until the runner answers (only the first
    for a task too large to keep them). A failure is forgotten here and met again, reported, in the check."""
    runner = ev.session.runner
    try:
        reference, cached = rounds_for(ev)
        if cached:
            return
        r = 0
        while reference.keep and r < reference.n and not runner.answers_within(0):
            made = reference.round(r)
            r += 1
            if not reference.keep and reference.hold_ahead(made):  # too large to keep: the check takes this one
                ev.held_rounds = reference  # let go when the evaluation ends without a check
        ev.diagnostics.reference_rounds_ahead = r
    except Exception:  # noqa: BLE001 - made again, and reported, by the check
        ev.ctx.rounds.discard(rounds_key(ev))
        release_unused(ev.device)


def ahead_of_calls(ev: Evaluation, reference: ReferenceRounds) -> Callable[[], None] | None:
    """On a GPU, the judge's work while the runner runs a correctness call: the next rounds, until the runner answers
    (None on the CPU, whose cores the call needs). A round that fails here is made again when its call comes."""
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
                reference.prepare(r)
            except Exception:  # noqa: BLE001 - made again, and reported, when its call comes
                failed.append(True)
                release_unused(ev.device)
                return
            diag.reference_rounds_during_calls = (diag.reference_rounds_during_calls or 0) + 1

    return make
