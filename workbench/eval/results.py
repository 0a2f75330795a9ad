"""The judge's `Reply` made into the public `Result` (or a cancelled evaluation's): identity from what the caller asked,
verdict and evidence from what the judge decided."""

from __future__ import annotations

from typing import Any

from workbench.candidate import Candidate
from workbench.eval.wire.judge_messages import Job, Reply
from workbench.result import Result
from workbench.tasks.task import Task

#: Reply fields copied into the Result under the same name.
_SAME_NAME = ("device_name", "max_abs_err", "max_rel_err", "timing", "reference_timing", "compiled_reference_timing",
              "judge_clock_timing", "coverage", "kernel_policy", "precision", "sandbox", "speedup_verdict",
              "speedup_basis", "speedup_ci", "speedup", "log")
#: Reply fields that are dicts, copied so the Result owns its own.
_DICTS = ("versions", "details", "error_budget", "telemetry", "stage_seconds", "evidence")


def _identity(task: Task, cand: Candidate, job: Job) -> dict[str, Any]:
    """The Result's fields that say what was evaluated, from the caller's own request."""
    size = dict(job.size)
    return dict(task=task.name, candidate_id=cand.id, candidate_name=cand.name or cand.id[:8], size=size,
                language=cand.language or "", dtype=str(size.get("dtype", task.dtypes[0] if task.dtypes else "")),
                device=job.device, source_hash=cand.id, task_hash=task.source_hash, source=cand.source, seed=job.seed)


def _metadata(cand: Candidate, judge_pid: int) -> dict[str, Any]:
    # `worker_pid`: the judge's PID under the name stored results use.
    return {"author": cand.author, "parent_id": cand.parent_id, "prompt_id": cand.prompt_id,
            "judge_pid": judge_pid or None, "worker_pid": judge_pid or None, **cand.metadata}


def result_from_reply(task: Task, cand: Candidate, job: Job, reply: Reply) -> Result:
    message = reply.message
    if not message and reply.status in ("timeout", "crashed") and reply.died:
        # The judge itself died or stopped answering (the candidate's runner's faults the judge reports itself).
        from workbench.eval.judge.runners.faults import died_message

        message = "the evaluation's judge process " + died_message(reply.status, reply.died, reply.log, cand.source,
                                                                   cand.language or "", job.device, job.timeout)
    fields: dict[str, Any] = {**_identity(task, cand, job), **{name: getattr(reply, name) for name in _SAME_NAME},
                              **{name: dict(getattr(reply, name)) for name in _DICTS}}
    result = Result(status=reply.status, message=message, flags=list(reply.flags),
                    warnings=list(dict.fromkeys(reply.warnings)), metadata=_metadata(cand, reply.judge_pid),
                    protocol=reply.diagnostics.as_dict(), **fields)
    if reply.sandbox_reason:
        result.protocol["sandbox_reason"] = reply.sandbox_reason
    if reply.diagnostics.tuned_config:
        result.metadata["tuned_config"] = reply.diagnostics.tuned_config
    if result.timing and result.reference_timing and result.timing.clock != "interpreter":
        if result.speedup is None:  # a judge that timed unpaired: the ratio of the medians
            result.speedup = result.reference_timing.median_ms / result.timing.median_ms
        if result.compiled_reference_timing:
            result.speedup_vs_compile = result.compiled_reference_timing.median_ms / result.timing.median_ms
    if result.status == "ok" and not result.message:
        notes = result.details.get("notes") or []
        result.message = "all checks passed" + (f" ({'; '.join(notes)})" if notes else "")
    return result


def cancelled_result(task: Task, cand: Candidate, job: Job, seconds: float) -> Result:
    """What a cancelled evaluation returns: status "cancelled", nothing judged."""
    return Result(status="cancelled", metadata=_metadata(cand, 0), **_identity(task, cand, job),
                  message=f"cancelled after {seconds:.1f} s: the evaluation was stopped and its judge ended; "
                          "nothing was judged or stored. Evaluate again for a verdict.")


def cluster_failed_result(task: Task, cand: Candidate, job: Job, detail: str) -> Result:
    """What a candidate the cluster could not evaluate returns: status "crashed", nothing judged."""
    return Result(status="crashed", metadata=_metadata(cand, 0), **_identity(task, cand, job),
                  message=f"the cluster could not evaluate this candidate ({detail}); nothing was judged. A candidate "
                          "cannot reach a worker from its sandbox, so look at the workers' logs and evaluate again.")
