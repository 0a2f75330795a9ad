"""evaluate(task, candidate) -> Result: the public entry point. Orchestrates the worker; never raises for a
candidate's faults (every fault is a Result with a status and a message)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import WorkbenchError
from workbench.eval.worker import DEFAULT_TIMEOUT, run_job
from workbench.result import Result, Timing
from workbench.tasks.task import Task, get_task

_FIX_HINTS = {
    "timeout": "the candidate did not finish in time: look for an infinite loop or a grid far larger than the "
               "problem, or raise the limit with evaluate(..., timeout=seconds)",
    "crashed": "the worker process died (segfault, abort or out-of-memory kill): look for out-of-bounds pointers, "
               "ctypes calls or huge allocations; the next evaluation starts a fresh worker",
}
_SIGNAL_CAUSES = {
    "SIGSEGV": "segmentation fault: the candidate touched memory it does not own",
    "SIGBUS": "bus error: a misaligned or unmapped memory access",
    "SIGABRT": "abort: a library (or the candidate) gave up, often after a failed assertion",
    "SIGFPE": "arithmetic fault (e.g. an integer division by zero in native code)",
    "SIGILL": "illegal instruction",
    "SIGKILL": "killed from outside: a cancelled run, or the system's out-of-memory killer",
}
#: Innermost frame inside a candidate file in a faulthandler dump ("most recent call first") or a traceback.
_CANDIDATE_FRAME = re.compile(r'File "[^"]*kwb_candidate_[^"]*\.py", line (\d+),? in (\S+)')


def _crash_message(reply: dict[str, Any], cand: Candidate, limit: float) -> str:
    """What died, where in the candidate (from the worker's fault handler), what to do, and the last output."""
    status, detail, log = reply["status"], reply.get("died", ""), reply.get("log", "")
    if status == "timeout":
        message = f"timeout: no result within {limit:g} s (the worker was killed). Fix: {_FIX_HINTS['timeout']}."
    else:
        signame = next((name for name in _SIGNAL_CAUSES if name in detail), None)
        cause = f" ({_SIGNAL_CAUSES[signame]})" if signame else ""
        message = f"crashed: {detail}{cause}"
        frame = _CANDIDATE_FRAME.search(log)
        if frame:
            lines = cand.source.splitlines()
            number = int(frame.group(1))
            code = lines[number - 1].strip() if 0 < number <= len(lines) else ""
            message += f", at candidate line {number} in {frame.group(2)}" + (f": {code}" if code else "")
        message += f". Fix: {_FIX_HINTS['crashed']}."
        if signame == "SIGSEGV" and cand.language == "triton" and reply.get("device", "cpu") == "cpu":
            message += (" Under Triton's CPU interpreter an unmasked out-of-bounds tl.load/tl.store reads or writes "
                        "host memory directly: check the masks and offsets of every load and store.")
    if log:
        tail = "\n".join(ln for ln in log.splitlines() if not ln.startswith("Extension modules:"))
        message += "\nLast worker output:\n" + tail[-1500:]
    return message


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
             size: str | dict[str, Any] | None = None, seed: int = 0, rounds: int = 5, timeout: float | None = None,
             time_it: bool = True, store: Any = None, compile_reference: bool = True) -> Result:
    """Check and time `candidate` on `task` in an isolated worker.

    size: a preset name ("cpu"/"gpu") or a dict of module constants (a "dtype" key switches the dtype);
    None picks the device's preset. timeout: seconds for the whole evaluation, worker start-up excluded
    (CPU 120, GPU 60 by default). Raises WorkbenchError only for the caller's mistakes (unknown task or
    device); every fault of the candidate comes back as a Result with a status and a message.
    """
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
    started = time.perf_counter()
    reply = run_job(job, device, limit)
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
    if status in _FIX_HINTS and "died" in reply:
        message = _crash_message({**reply, "device": device}, cand, limit)
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
    )
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
