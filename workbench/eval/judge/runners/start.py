"""Starting a candidate's runner and importing the candidate in it: the sandbox, the build caches it may use, the
compile budget, and what the Result records about them (transport, compile seconds, cache hits).

Two caches reach a runner, both owned by the judge and keyed by the candidate's source and the toolchain, so an
entry only ever serves the source that made it (CHEATS.md rows 20 and 27):
- CUDA builds (`build_cache`): the judge copies a finished build out of the runner's private directory, refusing
  any link (nothing is followed out of the runner's root), and binds an entry read-only into later runners of the same source;
- Triton's kernel cache: a directory per source, bound writable into that source's runners only, so evaluating a
  source again (a sweep size, a cell run again, a study point) does not compile its kernels again, and no runner
  sees or writes another source's directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from workbench.eval.judge.correctness.check import CandidateFailure
from workbench.eval.judge.device_lock import SHARED, held
from workbench.eval.judge.reply import Stop
from workbench.eval.judge.runners import build_cache
from workbench.eval.judge.runners import spare as spare_runner
from workbench.eval.judge.runners.libraries import libraries_for
from workbench.eval.judge.runners.process import Limits, RunnerDied, RunnerProcess
from workbench.eval.judge.runners.session import CandidateSession, RemoteError

#: Seconds for loading a candidate, CUDA compilation included (evaluate(compile_timeout=...) overrides).
DEFAULT_COMPILE_TIMEOUT = 600.0


def start_runner(ev: Any) -> CandidateSession:
    """A fresh sandboxed runner for the evaluation `ev`'s candidate, with the caches of its source bound in."""
    cand = ev.cand
    binds: list[tuple[str, str]] = []
    ev.build_key, ev.build_entry = None, None
    if cand["language"] == "cuda":
        ev.build_key = build_cache.key(cand["source"], "cuda")
        ev.build_entry = build_cache.lookup(ev.build_key)
        if ev.build_entry is not None:
            binds.append((str(ev.build_entry), build_cache.MOUNT_POINT))
    writable = []
    triton_dir = build_cache.triton_dir(cand["source"], ev.device)
    if triton_dir is not None:
        writable.append((str(triton_dir), build_cache.TRITON_MOUNT))
    started = time.perf_counter()
    warm = libraries_for(ev.device, ev.task.source, cand["source"])
    ev.spare_key = spare_runner.SpareKey(ev.device, ev.job.get("memory_bytes"), ev.ctx.share_ipc, warm)
    ev.spare = _take_spare(ev.ctx, ev.spare_key) if not binds else None
    if ev.spare is not None:
        ev.triton_dir = triton_dir
        ev.base["protocol"]["triton_entries_lent"] = spare_runner.fill(ev.spare, triton_dir)
        runner = ev.spare.runner
    else:
        runner = RunnerProcess.start(ev.ctx.fork_server, ev.device, Limits(memory_bytes=ev.job.get("memory_bytes")),
                                     binds, share_ipc=ev.ctx.share_ipc, writable_binds=writable, warm=warm)
    ev.base["protocol"]["runner_start_s"] = round(time.perf_counter() - started, 3)
    ev.base["protocol"]["runner"] = "spare" if ev.spare is not None else "started"
    session = CandidateSession(runner, ev.device, ev.timeout, ev.ctx.transport)
    if ev.build_entry is not None and runner.workdir:  # no sandbox: no bind, the judge copies the entry in
        build_cache.copy_entry(ev.build_entry, os.path.join(runner.workdir, "torch_extensions"))
    ready = runner.ready
    ev.base.update(versions=dict(ready.versions), device_name=ready.device_name, sandbox=ready.sandbox)
    ev.base["protocol"].update(runner_pid=runner.inner_pid, transport=session.arena.transport,
                               ipc_namespace="shared" if ev.ctx.share_ipc else "private",
                               triton_cache="per-source" if triton_dir is not None else "private")
    if ready.sandbox_reason:
        ev.base["sandbox_reason"] = ready.sandbox_reason
    if ev.ctx.transport_note:
        ev.base["protocol"]["transport_note"] = ev.ctx.transport_note
    return session


def _take_spare(ctx: Any, key: spare_runner.SpareKey) -> spare_runner.Spare | None:
    """The judge's spare runner when it was started for jobs like this one and is up (`spare_runner.py`); a spare
    that does not fit is closed (the next one is started for this job's kind)."""
    spare, ctx.spare = ctx.spare, None
    if spare is None:
        return None
    if not spare.key.serves(key):
        with held(getattr(ctx, "device_lock", None), SHARED):  # its context's teardown: no timing beside
            spare_runner.discard(spare)
        return None
    return spare if spare_runner.settle(spare) else None


def start_spare(ev: Any) -> None:
    """Start the runner of this judge's next candidate, like this one's (`spare_runner.py`); called while the judge
    holds the device shared."""
    set_bytes = ev.plan.pool.set_bytes if ev.plan is not None else None
    if ev.ctx.spare is None and getattr(ev, "spare_key", None) is not None and \
            spare_runner.wanted(ev.device, set_bytes):
        ev.ctx.spare = spare_runner.spawn(ev.ctx, ev.spare_key)


def settle_spare(ev: Any) -> None:
    """Wait, still holding the device shared, for the spare's warm-up to end (`spare_runner.py`)."""
    if ev.ctx.spare is not None and not spare_runner.settle(ev.ctx.spare):
        ev.ctx.spare = None


def close_runner(ev: Any) -> None:
    """At the end of an evaluation: its runner killed now (nothing of the candidate runs past this point), and what
    only waits left for after the reply (`Context.tidy`): the runner's exit (on a GPU a process's exit waits for
    its driver's teardown), its shared memory, then the spare's Triton entries (`after_close`, once nothing of the
    runner can write any more). The caller gets its Result sooner; the judge still takes its next job only once
    all of it is done, so a next evaluation finds the memory given back."""
    session = ev.session
    session.close(wait=False)

    def gone() -> None:
        session.release()
        after_close(ev)

    ev.ctx.after_reply.append(gone)


def after_close(ev: Any) -> None:
    """Once the evaluation's runner is closed: a spare's Triton entries copied into its source's cache."""
    spare, ev.spare = getattr(ev, "spare", None), None
    if spare is not None:
        spare_runner.give_back(spare, getattr(ev, "triton_dir", None))


def load_candidate(ev: Any, meanwhile: Callable[[], None] | None = None) -> None:
    """Import the candidate in its runner within the compile budget (`meanwhile()`, the judge's own work, runs while
    the runner imports); store a CUDA build the judge may reuse."""
    session, cand = ev.session, ev.cand
    budget = float(ev.job.get("compile_timeout") or DEFAULT_COMPILE_TIMEOUT)
    try:
        session.load(cand["source"], cand["language"], cand.get("entry", "ModelNew"), ev.precision.to_spec(), budget,
                     meanwhile)
    except CandidateFailure as exc:
        f = exc.original.fault if isinstance(exc.original, RemoteError) else None
        raise Stop({"status": "compile_error", "message": str(exc.original), "log": f.log if f else ""}) from None
    except RunnerDied as died:
        if died.kind == "timeout":
            raise Stop({"status": "timeout", "message": (
                f"timeout: loading the candidate took more than its compile budget of {budget:g} s (CUDA "
                "compilation included). Raise it with evaluate(..., compile_timeout=seconds).")}) from None
        raise
    ev.base["protocol"]["load_seconds"] = round(session.load_seconds, 3)
    if session.warmup_seconds:
        ev.base["protocol"]["runner_warmup_s"] = round(session.warmup_seconds, 3)
    if ev.build_key is not None:
        ev.base["protocol"]["compile_seconds"] = round(session.load_seconds, 3)
        ev.base["protocol"]["compile_cache"] = "hit" if ev.build_entry is not None else "miss"
        if ev.build_entry is None:
            if build_cache.store(ev.build_key, *session.runner.build_location()) is not None:
                ev.base["protocol"]["compile_cache"] = "stored"
