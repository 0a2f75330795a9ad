"""evaluate(task, candidate) -> Result: the public entry point. Hands the job to the judge process; never raises for a
candidate's faults (every fault is a Result with a status and a message)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import WorkbenchError
from workbench.eval.caller.judges import DEFAULT_COMPILE_TIMEOUT, DEFAULT_TIMEOUT, cpu_memory_bytes, run_job
from workbench.eval.options import EvalOptions
from workbench.result import Result, Timing
from workbench.tasks.task import Task, get_task


def _judge_died_message(reply: dict[str, Any], cand: Candidate, device: str, limit: float) -> str:
    """The judge itself died or stopped answering (not the candidate's runner, whose faults the judge reports)."""
    from workbench.eval.judge.fault_messages import died_message

    return ("the evaluation's judge process " + died_message(reply["status"], reply.get("died", ""),
                                                             reply.get("log", ""), cand.source, cand.language or "",
                                                             device, limit))


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _require_device(device: str) -> None:
    """Asking for a GPU where there is none is the caller's mistake, not the candidate's: raise, store nothing."""
    if not device.startswith(("cuda", "cpu")):
        raise WorkbenchError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N' (or None for the default)")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise WorkbenchError(f"device={device!r} was requested but this machine has no usable CUDA device "
                                 "(torch.cuda.is_available() is False). Use device='cpu' (Triton interpreter) or "
                                 "device=None to pick the default; `kwb doctor` shows what is missing.")


def _check_sizes(task: Task, size: dict[str, Any], device: str, explicit: bool) -> list[dict[str, Any]]:
    """Sizes the correctness protocol uses: the task's own, re-typed when the caller asked for another dtype."""
    sizes = task.check_sizes(device)
    if explicit:
        dtype = size.get("dtype")
        sizes = [size] + [({**s, "dtype": dtype} if dtype else s) for s in sizes if s != size]
    return sizes[:3]


def evaluate(task: Task | str, candidate: Candidate | str, device: str | None = None, *,
             options: EvalOptions | None = None, store: Any = None, **overrides: Any) -> Result:
    """Check and time `candidate` on `task`: a trusted judge process checks it, and the candidate runs in a fresh
    sandboxed runner of its own (DESIGN.md section 3).

    options: an `EvalOptions` (device, size, seed, rounds, timeout, compile_timeout, time_it, compile_reference);
    keyword arguments of the same names override it, and `device` may be given positionally. Raises WorkbenchError
    only for the caller's mistakes (unknown task, device or option); every fault of the candidate comes back as a
    Result with a status and a message.
    """
    opts = (options or EvalOptions()).replace(**overrides)
    if device is not None:
        opts = opts.replace(device=device)
    device, size, seed, rounds = opts.device, opts.size, opts.seed, opts.rounds
    timeout, compile_timeout, time_it = opts.timeout, opts.compile_timeout, opts.time_it
    compile_reference = opts.compile_reference
    task = get_task(task) if isinstance(task, str) else task
    if isinstance(candidate, str):
        candidate = Candidate(source=candidate)
    if not isinstance(task, Task):
        raise WorkbenchError(f"evaluate needs a Task or a task name, got {type(task).__name__}")
    device = device or default_device()
    _require_device(device)
    explicit = isinstance(size, dict)
    resolved = task.size(size, device)
    job = {
        "task": task.to_spec(), "candidate": candidate.to_spec(), "device": device, "seed": seed,
        "rounds": rounds, "time_it": time_it, "size": resolved,
        "check_sizes": _check_sizes(task, resolved, device, explicit), "compile_reference": compile_reference,
    }
    limit = timeout if timeout is not None else DEFAULT_TIMEOUT["cuda" if device.startswith("cuda") else "cpu"]
    compile_limit = compile_timeout if compile_timeout is not None else DEFAULT_COMPILE_TIMEOUT
    job.update(timeout=limit, compile_timeout=compile_limit,
               memory_bytes=None if device.startswith("cuda") else cpu_memory_bytes())
    started = time.perf_counter()
    # The judge enforces the candidate's limits; this bound only guards against a judge that stops answering.
    reply = run_job(job, device, compile_limit + 30 * limit + 600)
    result = _result_from_reply(task, candidate, device, resolved, seed, reply, limit)
    result.metadata["eval_seconds"] = round(time.perf_counter() - started, 3)
    _annotate(result, task, reply.get("counted"))
    if store is not None:
        store.add(result)
    return result


def _timing(data: dict[str, Any] | None) -> Timing | None:
    return Timing(**data) if data else None


def _result_from_reply(task: Task, cand: Candidate, device: str, size: dict, seed: int, reply: dict[str, Any],
                       limit: float) -> Result:
    status = reply.get("status", "runtime_error")
    message = reply.get("message", "")
    if not message and status in ("timeout", "crashed") and "died" in reply:
        message = _judge_died_message(reply, cand, device, limit)
    flags = list(reply.get("flags", []))
    result = Result(
        task=task.name, candidate_id=cand.id, candidate_name=cand.name or cand.id[:8], language=cand.language or "",
        status=status, message=message, flags=flags, warnings=list(dict.fromkeys(reply.get("warnings", []))),
        size=dict(size), dtype=str(size.get("dtype", task.dtypes[0] if task.dtypes else "")), device=device,
        device_name=reply.get("device_name", ""), max_abs_err=reply.get("max_abs_err"),
        max_rel_err=reply.get("max_rel_err"), timing=_timing(reply.get("timing")),
        reference_timing=_timing(reply.get("reference_timing")),
        compiled_reference_timing=_timing(reply.get("compiled_reference_timing")),
        source_hash=cand.id, task_hash=task.source_hash, source=cand.source, seed=seed,
        versions=reply.get("versions", {}), log=reply.get("log", ""), details=reply.get("details", {}),
        metadata={"author": cand.author, "parent_id": cand.parent_id, "prompt_id": cand.prompt_id,
                  "worker_pid": reply.get("worker_pid"), **cand.metadata},
        judge_clock_timing=_timing(reply.get("judge_clock_timing")), coverage=reply.get("coverage"),
        stage_seconds=dict(reply.get("stage_seconds") or {}),
        kernel_policy=reply.get("kernel_policy", ""), precision=reply.get("precision", ""),
        error_budget=reply.get("error_budget") or {}, sandbox=reply.get("sandbox", ""),
        evidence=dict(reply.get("evidence") or {}),
        protocol=reply.get("protocol") or {}, telemetry=reply.get("telemetry") or {},
        speedup_verdict=reply.get("speedup_verdict"), speedup_basis=reply.get("speedup_basis", ""),
        speedup_ci=tuple(reply["speedup_ci"]) if reply.get("speedup_ci") else None,
    )
    if reply.get("sandbox_reason"):
        result.protocol["sandbox_reason"] = reply["sandbox_reason"]
    if result.timing and result.reference_timing and result.timing.clock != "interpreter":
        result.speedup = result.reference_timing.median_ms / result.timing.median_ms
        if result.compiled_reference_timing:
            result.speedup_vs_compile = result.compiled_reference_timing.median_ms / result.timing.median_ms
    if result.status == "ok" and not result.message:
        notes = result.details.get("notes") or []
        result.message = "all checks passed" + (f" ({'; '.join(notes)})" if notes else "")
    return result


def _annotate(result: Result, task: Task, counted: dict[str, Any] | None) -> None:
    """Roofline fields (FLOPs, bytes, SOL, bound, faster-than-physics) when the roofline package is present."""
    try:
        from roofline import annotate_result
    except ImportError:
        if counted:
            result.flops = counted.get("flops")
            result.bytes = counted.get("bytes")
        return
    annotate_result(result, task, counted)


def evaluate_many(task: Task | str, candidates: Iterable[Candidate], device: str | None = None, *,
                  progress: bool = True, store: Any = None, **kw: Any) -> list[Result]:
    """Evaluate several candidates one after another (one worker, warm caches), with a progress bar."""
    from tqdm.auto import tqdm

    cands = list(candidates)
    results = []
    for cand in tqdm(cands, desc="evaluating", disable=not progress, unit="candidate"):
        results.append(evaluate(task, cand, device, store=store, **kw))
    return results
