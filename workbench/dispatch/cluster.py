"""Evaluations on a Dask cluster: each candidate a Dask task that a worker evaluates with its own judges on its GPUs
(`evaluate`), the Result sent back and stored here, once, as it arrives. A worker lost mid-batch loses nothing (the
scheduler hands its candidates to another), and a candidate that keeps killing workers gets a "crashed" Result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench.candidate import Candidate
from workbench.errors import WorkbenchError
from workbench.result import Result
from workbench.tasks.task import Task

if TYPE_CHECKING:
    from workbench.eval.options import EvalOptions

#: Most batch jobs (or local workers without GPUs) a batch of candidates asks a cluster for.
MAX_WORKERS = 8


def worker_options(opts: EvalOptions) -> EvalOptions:
    """On a Dask worker: on a local cluster's numbered worker with several GPUs, the worker's number picks its GPU,
    so workers do not share one; a remote worker keeps the GPUs it sees (its CUDA_VISIBLE_DEVICES or KWB_GPUS)."""
    from workbench.dispatch.gpus import visible_count

    if opts.devices is None and (opts.device or "cuda").startswith("cuda"):
        name = _worker_name()
        count = visible_count()
        if name is not None and count > 1:
            return opts.replace(devices=(f"cuda:{name % count}",))
    return opts


def worker_address() -> str | None:
    """The Dask worker this runs on, for `Result.metadata["cluster_worker"]`."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return None


def _worker_name() -> int | None:
    try:
        from distributed import get_worker

        name = get_worker().name
    except (ImportError, ValueError):
        return None
    return int(name) if str(name).isdigit() else None


def evaluate_on_cluster(task: Task, candidates: list[Candidate], opts: EvalOptions, cluster: str,
                        work: Callable[[Task, Candidate, EvalOptions], Result],
                        cancelled: Callable[[Candidate], Result], failed: Callable[[Candidate, str], Result],
                        on_result: Callable[[int, Result], Any] | None = None) -> list[Result]:
    """Evaluate `candidates` on `cluster` (`workbench/cluster.py` spellings) with `work(task, candidate, options)` on
    a worker; `on_result(index, result)` runs here as each arrives. Results in order; a cancel makes the rest
    `cancelled(candidate)`, a candidate the cluster could not evaluate `failed(candidate, why)`."""
    from workbench.cluster import make_client

    distributed = __import__("distributed")
    client, owned = make_client(cluster, min(len(candidates), MAX_WORKERS), "evaluating on a Dask cluster")
    sent = opts.replace(on_progress=None, cancel=None)  # neither crosses to a worker
    out: list[Result | None] = [None] * len(candidates)
    try:
        futures = {client.submit(work, task, cand, sent, pure=False, key=f"kwb-eval-{i}-{cand.id}"): i
                   for i, cand in enumerate(candidates)}
        for future in distributed.as_completed(list(futures)):
            i = futures[future]
            if opts.cancel is not None and opts.cancel.is_set():
                break
            out[i] = result = _outcome(future, candidates[i], failed)
            if on_result is not None:
                on_result(i, result)
        for future in futures:
            future.cancel()
    finally:
        client.close()
        if owned is not None:
            owned.close()
    return [r if r is not None else cancelled(candidates[i]) for i, r in enumerate(out)]


def _outcome(future: Any, candidate: Candidate, failed: Callable[[Candidate, str], Result]) -> Result:
    """The worker's Result, or a "crashed" one when the cluster could not evaluate the candidate."""
    try:
        result = future.result()
    except Exception as exc:  # noqa: BLE001 - KilledWorker, a lost scheduler, a worker-side error
        reason = type(exc).__name__
        detail = ("the cluster lost every worker that tried it" if reason == "KilledWorker"
                  else f"{reason}: {str(exc)[:300]}")
        return failed(candidate, detail)
    if not isinstance(result, Result):
        raise WorkbenchError(f"a cluster worker sent back {type(result).__name__}, not a Result: is the same "
                             "version of the workbench installed on every worker?")
    return result
