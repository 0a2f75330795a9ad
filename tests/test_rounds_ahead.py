"""The reference's side of the correctness rounds is made while the runner imports the candidate
(`judge/reference/ahead.py`): the judge would only wait there. Evaluations of the judge on a scripted runner
(`tests/fake_runner.py`) on the CPU."""

from __future__ import annotations

import pytest
import torch
from engine_tasks import SOFTMAX
from fake_runner import FakeRunner, Script, fake_context, fake_job, judge_fake
from redteam.attacks import softmax_task

import workbench as wb
from workbench.eval.judge.evaluation import Evaluation
from workbench.eval.judge.runners.session import CandidateSession

#: A second of import: the judge makes every round before the runner answers.
SLOW_IMPORT = Script(load_s=1.0)


def test_a_slow_import_finds_every_round_made_and_the_next_candidate_reuses_them():
    task = softmax_task()
    ctx = fake_context()
    first = judge_fake(task, SLOW_IMPORT, context=ctx, time_it=False)
    assert first.status == "ok", first.message
    rounds = len(first.details["rounds"])
    assert rounds >= 5
    assert first.protocol["reference_cache"] == "miss"  # made by this evaluation, if ahead of its check
    assert first.protocol["reference_rounds_ahead"] == rounds
    assert first.protocol["check_phases"]["reference"] < 0.05  # nothing left for the check to make

    second = judge_fake(task, Script(), context=ctx, time_it=False)
    assert second.status == "ok", second.message
    assert second.protocol["reference_cache"] == "hit"
    assert "reference_rounds_ahead" not in second.protocol  # nothing to make
    assert second.max_abs_err == first.max_abs_err  # the same rounds, the same honest kernel


def test_a_reference_failing_ahead_fails_in_the_check_with_the_task_named():
    """Rounds made ahead are best effort: a reference that fails on a checked size is reported by the check, as the
    task's failure, not lost and not blamed on the candidate."""
    source = SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                             "if x.shape[-1] == 100:\n            raise ValueError('no rows of 100')\n"
                             "        return torch.softmax(x, dim=-1)")
    task = wb.Task.from_source(source, name="fails_at_100",
                               sweep={"cpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}]})
    res = judge_fake(task, Script(forward=lambda x: torch.softmax(x, dim=-1), load_s=1.0), time_it=False)
    assert res.status == "runtime_error"
    assert "the reference failed" in res.message and "no rows of 100" in res.message
    assert "not the candidate" in res.message
    assert "reference_rounds_ahead" not in res.protocol


class _Answered(FakeRunner):
    """A runner whose reply is already waiting."""

    def answers_within(self, seconds: float) -> bool:
        return True


def test_no_round_is_made_ahead_once_the_runner_has_answered(evaluation):
    """A round made after the runner answered would only delay its reply (the check makes it next anyway)."""
    from workbench.eval.judge.reference import ahead as check_rounds

    ev = evaluation(softmax_task(), "cpu", _Answered)
    check_rounds.make_ahead(ev)
    assert ev.diagnostics.reference_rounds_ahead == 0
    reference, cached = check_rounds.rounds_for(ev)
    assert not cached and reference.n >= 5  # the check makes them, and its Result says "miss"


class _AnswersAfter(FakeRunner):
    """A runner whose reply arrives after `polls` looks at its channel (set on the runner once started)."""

    polls = 0

    def answers_within(self, seconds: float) -> bool:
        self.polls -= 1
        return self.polls < 0


@pytest.fixture
def evaluation():
    """`make(task, device, runner_class, polls)`: an Evaluation of the judge whose candidate runner, of
    `runner_class`, is started (`polls` set on it) and whose device reads `device`; its runners are closed after the
    test."""
    made: list[Evaluation] = []

    def make(task, device: str, runner_class: type[FakeRunner], polls: int = 0) -> Evaluation:
        ctx = fake_context()
        ctx.runner_class = runner_class
        ev = Evaluation(fake_job(task, Script()), ctx)
        runner = runner_class.start(ctx.fork_server, "cpu")
        runner.polls = polls
        ev.runner.session = CandidateSession(runner, "cpu", 60.0)
        ev.device = device
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.session.close()


def test_beside_a_gpu_call_the_next_rounds_are_made_until_the_runner_answers(evaluation):
    """`check_rounds.ahead_of_calls`, the judge's work while the runner runs a correctness call on a GPU: rounds in
    order, one at a time, none after the reply is waiting. (The reference itself runs on the CPU here; only the
    evaluation's device decides whether the work is done.)"""
    from workbench.eval.judge.reference import ahead as check_rounds

    ev = evaluation(softmax_task(), "cpu", _AnswersAfter, polls=2)
    runner = ev.session.runner
    reference, _ = check_rounds.rounds_for(ev)
    ev.device = "cuda"
    work = check_rounds.ahead_of_calls(ev, reference)
    assert work is not None and reference.pending() == 0
    work()
    assert reference.pending() == 2 and ev.diagnostics.reference_rounds_during_calls == 2
    work()  # the reply is waiting: nothing more
    assert reference.pending() == 2
    runner.polls = 99
    work()
    assert reference.pending() is None and ev.diagnostics.reference_rounds_during_calls == reference.n


def test_on_the_cpu_no_round_is_made_beside_a_call(evaluation):
    """On the CPU the judge's rounds would take the cores the runner's call is timed and run on."""
    from workbench.eval.judge.reference import ahead as check_rounds

    ev = evaluation(softmax_task(), "cpu", _AnswersAfter, polls=99)
    reference, _ = check_rounds.rounds_for(ev)
    assert check_rounds.ahead_of_calls(ev, reference) is None


def test_a_round_failing_beside_a_call_is_left_for_its_call(evaluation):
    """A reference that fails on a checked size stops the work beside the calls; the round stays unmade, so the
    check makes it when its call comes and reports the task's failure there."""
    from workbench.eval.judge.reference import ahead as check_rounds

    source = SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                             "if x.shape[-1] == 100:\n            raise ValueError('no rows of 100')\n"
                             "        return torch.softmax(x, dim=-1)")
    task = wb.Task.from_source(source, name="fails_at_100",
                               sweep={"cpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}]})
    ev = evaluation(task, "cpu", _AnswersAfter, polls=99)
    reference, _ = check_rounds.rounds_for(ev)
    ev.device = "cuda"
    work = check_rounds.ahead_of_calls(ev, reference)
    assert work is not None
    work()
    stuck = reference.pending()
    assert stuck is not None and reference.sizes[reference.size_index(stuck)]["dim"] == 100
    made = (ev.diagnostics.reference_rounds_during_calls or 0)
    work()  # stopped for good: the failure is the check's to report
    assert reference.pending() == stuck and (ev.diagnostics.reference_rounds_during_calls or 0) == made


def _rounds(task, budget: int = 1 << 62):
    import tempfile

    from workbench.eval.judge.reference.rounds import ReferenceRounds
    from workbench.tasks.task import LoadedReference

    ref = LoadedReference(task, tempfile.mkdtemp(prefix="kwb_test_ref_"))
    return ReferenceRounds.create(ref, "cpu", task.check_sizes("cpu"), 0, task.tolerance, task.distributions, 5,
                                  budget)


def test_rounds_too_large_to_keep_are_made_one_ahead_when_two_fit_and_are_the_same_rounds():
    """A task whose rounds do not all fit the budget makes each one when it is used; beside a call the next one is
    made and held (two rounds at once, never more), and it is the round the check would have made."""
    task = softmax_task()
    plain = _rounds(task)
    one = plain.round(0).nbytes
    ahead, alone = _rounds(task, budget=int(2.5 * one)), _rounds(task, budget=int(2.5 * one))
    ahead.round(0)
    alone.round(0)
    assert not ahead.keep and ahead.pending() == 1
    ahead.prepare(1)
    assert ahead.pending() is None  # one held already
    for r in range(1, ahead.n):
        got, want = ahead.round(r), alone.round(r)
        assert got.number == want.number == r and got.dist == want.dist
        assert torch.equal(got.native, want.native)
        assert all(torch.equal(a, b) for a, b in zip(got.inputs, want.inputs, strict=True))
        assert [p.whole.tolist() for p in ahead.prior(r)] == [p.whole.tolist() for p in alone.prior(r)]
        if r + 1 < ahead.n:
            assert ahead.pending() == r + 1
            ahead.prepare(r + 1)
    assert ahead.pending() is None  # the last round is in use

    tight = _rounds(task, budget=int(1.5 * one))
    tight.round(0)
    assert not tight.keep and tight.pending() is None  # two rounds would not fit: none is made ahead

    ahead.drop_ahead()
    ahead.round(0)
    ahead.prepare(ahead.pending())
    ahead.drop_ahead()  # a check that ended early: its round ahead is not held, the next check starts over
    assert ahead._ahead is None and ahead.pending() == 0


def test_a_first_round_made_ahead_that_shows_the_rounds_too_large_to_keep_is_the_checks_first_round(evaluation):
    """Made while the runner imports, the first round may show that the rounds are too large to keep: it is held for
    the check, which does not make it again (`ReferenceRounds.hold_ahead`), and it is the round the check would have
    made; an evaluation that ends before its check lets it go."""
    from workbench.eval.judge.reference import ahead as check_rounds

    task = softmax_task()
    one = _rounds(task).round(0).nbytes
    ev = evaluation(task, "cpu", _AnswersAfter, polls=99)
    reference, _ = check_rounds.rounds_for(ev)
    reference.budget = int(2.5 * one)
    check_rounds.make_ahead(ev)
    assert not reference.keep and ev.diagnostics.reference_rounds_ahead == 1
    assert ev.held_rounds is reference and reference._ahead is not None
    made = reference._ahead

    used = reference.round(0)
    assert used is made  # not made twice
    alone = _rounds(task, budget=int(2.5 * one)).round(0)
    assert torch.equal(used.native, alone.native)
    assert all(torch.equal(a, b) for a, b in zip(used.inputs, alone.inputs, strict=True))
    assert reference.pending() == 1  # the next round is made beside the first one's calls, as before

    tight = evaluation(task, "cpu", _AnswersAfter, polls=99)
    tight_ref, _ = check_rounds.rounds_for(tight)
    tight_ref.budget = int(1.5 * one)  # two rounds would not fit: the one made ahead is let go, as before
    check_rounds.make_ahead(tight)
    assert not tight_ref.keep and tight_ref._ahead is None and tight_ref.pending() is None

    again = evaluation(task, "cpu", _AnswersAfter, polls=99)
    again_ref, _ = check_rounds.rounds_for(again)
    again_ref.budget = int(2.5 * one)
    check_rounds.make_ahead(again)
    again.held_rounds.drop_ahead()  # what Evaluation._run does when no check came
    assert again_ref._ahead is None and again_ref.pending() == 0  # the next check starts over


def test_a_constant_is_tried_on_later_rounds_only_for_outputs_it_passed_so_far():
    """`weak-task` needs a constant to pass in every round: once a round rules an output out, later rounds skip
    the passes over it, and a task whose output a constant does pass is still found weak."""
    weak_src = SOFTMAX.replace("return torch.softmax(x, dim=-1)", "return torch.zeros_like(x) + 1e-9")
    weak = wb.Task.from_source(weak_src, name="weak_constant")
    strong = _rounds(softmax_task())
    for r in range(strong.n):
        strong.round(r)
    assert strong._constant[0] == [False]
    assert all(strong._constant[r] == [None] for r in range(1, strong.n))  # not tried again
    strong.finish()
    assert not strong.task_findings

    found = _rounds(weak)
    for r in range(found.n):
        found.round(r)
    assert all(found._constant[r] == [True] for r in range(found.n))
    found.finish()
    assert any(f == "weak-task" and "a constant output passes" in d for f, d in found.task_findings)


def test_each_size_is_checked_once_then_the_rounds_left_use_the_one_with_the_fewest_input_elements():
    """The further rounds go to the cheapest size for an interpreted candidate: 37 x 100, not 16 x 1000 (a looped
    kernel's path) nor the preset 64 x 256; before every size has been made once, the plan cycles."""
    softmax = wb.get_task("softmax")
    fresh = _rounds(softmax)
    assert [fresh.size_index(r) for r in range(5)] == [0, 1, 2, 0, 1]  # no size measured yet
    rounds = _rounds(softmax)
    made = [rounds.round(r) for r in range(rounds.n)]
    sizes = softmax.check_sizes("cpu")
    assert sizes[1] == {"batch_size": 37, "dim": 100} and rounds.n >= 5
    assert [rd.size for rd in made] == sizes + [sizes[1]] * (rounds.n - 3)
    assert [rd.size_index for rd in made] == [rounds.size_index(r) for r in range(rounds.n)]
    assert len({rd.dist for rd in made}) == rounds.n  # every distribution kept, one round each
