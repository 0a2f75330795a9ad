"""The reference's side of the correctness rounds is made while the runner imports the candidate
(`Evaluation._reference_rounds_ahead`): the judge would only wait there. Real judges and runners on the CPU."""

from __future__ import annotations

from engine_tasks import SOFTMAX
from redteam.attacks import kernel, softmax_task

import workbench as wb

#: About a second of Python at import: the judge makes every round before the runner answers.
SLOW_IMPORT = "_warm = sum(i * i for i in range(6_000_000))"


def test_a_slow_import_finds_every_round_made_and_the_next_candidate_reuses_them(one_judge):
    task = softmax_task()
    first = wb.evaluate(task, kernel(at_import=SLOW_IMPORT), device="cpu", time_it=False)
    assert first.status == "ok", first.message
    rounds = len(first.details["rounds"])
    assert rounds >= 5
    assert first.protocol["reference_cache"] == "miss"  # made by this evaluation, if ahead of its check
    assert first.protocol["reference_rounds_ahead"] == rounds
    assert first.protocol["check_phases"]["reference"] < 0.05  # nothing left for the check to make

    second = wb.evaluate(task, kernel(), device="cpu", time_it=False)
    assert second.status == "ok", second.message
    assert second.protocol["reference_cache"] == "hit"
    assert "reference_rounds_ahead" not in second.protocol  # nothing to make
    assert second.max_abs_err == first.max_abs_err  # the same rounds, the same honest kernel


def test_a_reference_failing_ahead_fails_in_the_check_with_the_task_named(one_judge):
    """Rounds made ahead are best effort: a reference that fails on a checked size is reported by the check, as the
    task's failure, not lost and not blamed on the candidate."""
    source = SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                             "if x.shape[-1] == 100:\n            raise ValueError('no rows of 100')\n"
                             "        return torch.softmax(x, dim=-1)")
    task = wb.Task.from_source(source, name="fails_at_100",
                               sweep={"cpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}]})
    res = wb.evaluate(task, kernel(at_import=SLOW_IMPORT), device="cpu", time_it=False)
    assert res.status == "runtime_error"
    assert "the reference failed" in res.message and "no rows of 100" in res.message
    assert "not the candidate" in res.message
    assert "reference_rounds_ahead" not in res.protocol


class _Answered:
    """A runner whose reply is already waiting."""

    def answers_within(self, seconds: float) -> bool:
        return True


def test_no_round_is_made_ahead_once_the_runner_has_answered():
    """A round made after the runner answered would only delay its reply (the check makes it next anyway)."""
    import tempfile
    from types import SimpleNamespace

    from workbench.eval.judge import check_rounds
    from workbench.eval.judge.context import task_key
    from workbench.eval.judge.reference_rounds import ReferenceCache
    from workbench.tasks.task import LoadedReference

    task = softmax_task()
    ref = LoadedReference(task, tempfile.mkdtemp(prefix="kwb_test_ref_"))
    ev = SimpleNamespace(job={"check_sizes": task.check_sizes("cpu"), "rounds": 5}, key=task_key(task), seed=0,
                         device="cpu", ctx=SimpleNamespace(rounds=ReferenceCache()), task=task, reference=lambda: ref,
                         _cpu_safe=lambda s: s, base={"protocol": {}}, rounds_made_here=False,
                         session=SimpleNamespace(runner=_Answered()))
    check_rounds.make_ahead(ev)
    assert ev.base["protocol"]["reference_rounds_ahead"] == 0
    reference, cached = check_rounds.rounds_for(ev)
    assert not cached and reference.n >= 5  # the check makes them, and its Result says "miss"
