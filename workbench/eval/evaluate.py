"""evaluate(task, candidate) -> Result, the public entry point: a `Job` to a judge, the Result from its `Reply`;
never raises for a candidate's faults."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from workbench.candidate import Candidate
from workbench.dispatch.judges import DEFAULT_COMPILE_TIMEOUT, DEFAULT_TIMEOUT, cpu_memory_bytes
from workbench.dispatch.pool import occupancy, places, prestart, run_placed, total_slots
from workbench.dispatch.progress import Cancelled
from workbench.errors import WorkbenchError
from workbench.eval.options import EvalOptions
from workbench.eval.results import cancelled_result, cluster_failed_result, result_from_reply
from workbench.eval.wire.judge_messages import CandidateSpec, Job, Reply
from workbench.result import Result
from workbench.tasks.task import Task, get_task


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
    """Sizes the correctness protocol uses: the task's own, re-typed to a dtype asked for; an explicit size first
    (a task without presets, `{}`, then checks that size alone: its full size may not fit this machine)."""
    sizes = task.check_sizes(device)
    if explicit:
        dtype = size.get("dtype")
        sizes = [size] + [({**s, "dtype": dtype} if dtype else s) for s in sizes if s != size and s]
    return sizes[:3]


def resolve_options(options: EvalOptions | None, device: str | None, overrides: dict[str, Any],
                    here: bool = True) -> EvalOptions:
    """`options` (or the defaults) with keyword overrides and a positional device applied; with `here` (evaluated on
    this machine) the device (None: the GPU if any) and the GPUs `devices` names resolved and checked."""
    if options is not None and not isinstance(options, EvalOptions):
        raise WorkbenchError(f"options must be an EvalOptions, got {type(options).__name__}")
    opts = (options or EvalOptions()).replace(**overrides)
    device = device if device is not None else opts.device
    if not here:
        return opts.replace(device=device)
    device = device or default_device()
    _require_device(device)
    if device.startswith("cuda"):
        places(device, opts.devices)  # an unknown or invisible GPU is the caller's mistake, said before any work
    return opts.replace(device=device)


def make_job(task: Task, candidate: Candidate, opts: EvalOptions) -> Job:
    """The Job the judge gets: sizes resolved for the device, limits filled with their defaults."""
    device = opts.device or default_device()
    size = task.size(opts.size, device)
    cuda = device.startswith("cuda")
    return Job(task=task.to_spec(), candidate=CandidateSpec(**candidate.to_spec()), device=device, size=size,
               check_sizes=tuple(_check_sizes(task, size, device, isinstance(opts.size, dict))),
               timeout=opts.timeout if opts.timeout is not None else DEFAULT_TIMEOUT["cuda" if cuda else "cpu"],
               compile_timeout=opts.compile_timeout if opts.compile_timeout is not None else DEFAULT_COMPILE_TIMEOUT,
               memory_bytes=None if cuda else cpu_memory_bytes(), seed=opts.seed, rounds=opts.rounds,
               time_it=opts.time_it, compile_reference=opts.compile_reference,
               progress=opts.on_progress is not None)


def evaluate(task: Task | str, candidate: Candidate | str, device: str | None = None, *,
             options: EvalOptions | None = None, store: Any = None, **overrides: Any) -> Result:
    """Check and time `candidate` on `task` in a judge, the candidate sandboxed; keywords override `options`. Raises
    WorkbenchError only for the caller's mistakes; a candidate's fault is a Result with a status and a message."""
    task = get_task(task) if isinstance(task, str) else task
    if not isinstance(task, Task):
        raise WorkbenchError(f"evaluate needs a Task or a task name, got {type(task).__name__}")
    candidate = Candidate(source=candidate) if isinstance(candidate, str) else candidate
    if not isinstance(candidate, Candidate):
        raise WorkbenchError(f"evaluate needs a Candidate or a source string, got {type(candidate).__name__}")
    opts = resolve_options(options, device, overrides)
    job = make_job(task, candidate, opts)
    started = time.perf_counter()
    if opts.cancel is not None and opts.cancel.is_set():
        return cancelled_result(task, candidate, job, 0.0)
    try:
        # The judge enforces the candidate's limits; this bound only guards against a judge that stops answering.
        reply, place = run_placed(job, job.compile_timeout + 30 * job.timeout + 600, opts.on_progress, opts.cancel,
                                  opts.devices)
    except Cancelled:
        return cancelled_result(task, candidate, job, time.perf_counter() - started)
    result = result_from_reply(task, candidate, job, reply)
    result.metadata["eval_seconds"] = round(time.perf_counter() - started, 3)
    if place.startswith("cuda"):
        result.metadata["gpu"] = place
    _annotate(result, task, reply)
    if store is not None:
        store.add(result)
    return result


def _annotate(result: Result, task: Task, reply: Reply) -> None:
    """Roofline numbers for the Result (on the judge's ceilings where no datasheet serves); never the status."""
    from roofline import annotate_result
    from roofline.ceilings import Ceilings

    ceilings = Ceilings.from_dict(reply.ceilings) if reply.ceilings is not None else None
    annotate_result(result, task, reply.counted, ceilings=ceilings)


def evaluate_many(task: Task | str, candidates: Iterable[Candidate], device: str | None = None, *,
                  options: EvalOptions | None = None, progress: bool = True, store: Any = None,
                  cluster: str | None = None, **overrides: Any) -> list[Result]:
    """Evaluate several candidates over every chosen GPU's judges, or on `cluster` ("dask://host:port", "local[:N]",
    "slurm", "pbs"), with a progress bar; results in order, "cancelled" after a cancel."""
    from tqdm.auto import tqdm

    opts = resolve_options(options, device, overrides, here=cluster is None)
    cands = list(candidates)
    with tqdm(total=len(cands), desc="evaluating", disable=not progress, unit="candidate") as bar:
        def done(_: int, result: Result) -> None:
            if store is not None and result.status != "cancelled":
                store.add(result)
            bar.update(1)
            if cluster is None:
                bar.set_postfix_str(_occupancy_line(opts, len(cands) - bar.n), refresh=False)

        if cluster is not None:
            from workbench.dispatch.cluster import evaluate_on_cluster

            task_obj = get_task(task) if isinstance(task, str) else task
            here = opts.replace(device=opts.device or "cpu")  # enough to name a Job this machine may not run
            return evaluate_on_cluster(
                task_obj, cands, opts, cluster, evaluate_on_worker,
                cancelled=lambda cand: cancelled_result(task_obj, cand, make_job(task_obj, cand, here), 0.0),
                failed=lambda cand, why: cluster_failed_result(task_obj, cand, make_job(task_obj, cand, here), why),
                on_result=done)
        return evaluate_all(task, cands, opts, done)


def evaluate_on_worker(task: Task, candidate: Candidate, opts: EvalOptions) -> Result:
    """`evaluate` on a Dask worker (`dispatch/cluster.py`): the worker's GPUs, and which worker in the Result."""
    from workbench.dispatch.cluster import worker_address, worker_options

    result = evaluate(task, candidate, options=worker_options(opts))
    result.metadata["cluster_worker"] = worker_address()
    return result


def _occupancy_line(opts: EvalOptions, left: int) -> str:
    """"gpu0 2/4 · gpu1 3/4 · 5 left": judges at work per GPU and the candidates not finished."""
    device = opts.device or "cpu"
    if not device.startswith("cuda"):
        return f"{left} left"
    parts = [f"gpu{place.split(':')[1]} {busy}/{slots}" for place, (busy, slots) in occupancy(device, opts.devices).items()]
    return " · ".join([*parts, f"{left} left"])


class _EitherCancel:
    """Set when the caller's cancel token is set or when the batch itself is stopped (Ctrl-C, an error)."""

    def __init__(self, caller: Any) -> None:
        self.caller, self.own = caller, threading.Event()

    def is_set(self) -> bool:
        return self.own.is_set() or (self.caller is not None and self.caller.is_set())


def evaluate_all(task: Task | str, candidates: list[Candidate], opts: EvalOptions,
                 on_result: Callable[[int, Result], Any] | None = None) -> list[Result]:
    """Evaluate `candidates` on one task with up to every chosen GPU's judges in flight (`evaluate_pairs`)."""
    return evaluate_pairs([(task, cand) for cand in candidates], opts, on_result)


def evaluate_pairs(pairs: list[tuple[Task | str, Candidate]], opts: EvalOptions,
                   on_result: Callable[[int, Result], Any] | None = None) -> list[Result]:
    """Evaluate (task, candidate) pairs with every chosen GPU's judges in flight; `on_result(index, result)` runs here
    as each finishes. Results in order; Ctrl-C or an error in `on_result` cancels those in flight and propagates."""
    opts = resolve_options(opts, None, {})
    device = opts.device or default_device()  # resolved above; the fallback only satisfies the type
    slots = min(total_slots(device, opts.devices), len(pairs))
    if slots <= 1:
        results = []
        for i, (task, cand) in enumerate(pairs):
            results.append(evaluate(task, cand, options=opts))
            if on_result is not None:
                on_result(i, results[-1])
        return results
    prestart(device, slots, opts.devices)
    stop = _EitherCancel(opts.cancel)
    run_opts = opts.replace(cancel=stop)
    out: list[Result | None] = [None] * len(pairs)
    with ThreadPoolExecutor(slots, thread_name_prefix="kwb-evaluate") as pool:
        futures = {pool.submit(evaluate, task, cand, options=run_opts): i for i, (task, cand) in enumerate(pairs)}
        try:
            for future in as_completed(futures):
                i = futures[future]
                out[i] = result = future.result()
                if on_result is not None:
                    on_result(i, result)
        except BaseException:
            stop.own.set()
            for future in futures:
                future.cancel()
            raise
    return [r for r in out if r is not None]
