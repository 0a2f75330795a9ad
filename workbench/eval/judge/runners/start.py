"""Starting a candidate's runner (a spare where one serves) and importing it within its compile budget. The judge's
caches reach a runner keyed by source (docs/anti-cheating.md, cheats 20, 27): CUDA builds (`build_cache`, read-only),
Triton's kernel cache and a language's own JIT cache (CuTe DSL's), writable in that source's runners only."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from workbench import languages
from workbench.eval.judge import verdict
from workbench.eval.judge.correctness.check import CandidateFailure
from workbench.eval.judge.device_lock import SHARED, held
from workbench.eval.judge.runners import build_cache
from workbench.eval.judge.runners import spare as spare_runner
from workbench.eval.judge.runners.libraries import libraries_for
from workbench.eval.judge.runners.process import Limits, RunnerDied
from workbench.eval.judge.runners.session import CandidateSession, RemoteError

if TYPE_CHECKING:
    from workbench.eval.judge.context import Context
    from workbench.eval.judge.evaluation import Evaluation

#: Seconds for loading a candidate, CUDA compilation included (evaluate(compile_timeout=...) overrides).
DEFAULT_COMPILE_TIMEOUT = 600.0


def start_runner(ev: Evaluation) -> CandidateSession:
    """A fresh sandboxed runner for `ev`'s candidate, with the caches of its source bound in."""
    cand, state, diag = ev.candidate, ev.runner, ev.diagnostics
    binds: list[tuple[str, str]] = []
    if cand.language == "cuda":
        state.build_key = build_cache.key(cand.source, "cuda")
        state.build_entry = build_cache.lookup(state.build_key)
        if state.build_entry is not None:
            binds.append((str(state.build_entry), build_cache.MOUNT_POINT))
    triton_dir = build_cache.triton_dir(cand.source, ev.device)
    language = languages.get(cand.language)
    jit_dir = build_cache.language_cache_dir(language.name, cand.source, ev.device) if language.cache_mount else None
    writable = [(str(path), mount) for path, mount in ((triton_dir, build_cache.TRITON_MOUNT),
                                                       (jit_dir, language.cache_mount)) if path is not None]
    started = time.perf_counter()
    warm = libraries_for(ev.device, ev.task.source, cand.source)
    state.spare_key = spare_runner.SpareKey(ev.device, ev.job.memory_bytes, ev.ctx.share_ipc, warm)
    state.spare = _take_spare(ev.ctx, state.spare_key) if not binds and jit_dir is None else None
    if state.spare is not None:
        state.triton_dir = triton_dir
        diag.triton_entries_lent = spare_runner.fill(state.spare, triton_dir)
        runner = state.spare.runner
    else:
        runner = ev.ctx.runner_class.start(ev.ctx.fork_server, ev.device, Limits(memory_bytes=ev.job.memory_bytes),
                                     binds, share_ipc=ev.ctx.share_ipc, writable_binds=writable, warm=warm)
    session = CandidateSession(runner, ev.device, ev.timeout, ev.ctx.transport)
    if state.build_entry is not None and runner.workdir:  # no sandbox: no bind, the judge copies the entry in
        build_cache.copy_entry(state.build_entry, os.path.join(runner.workdir, "torch_extensions"))
    ready = runner.ready
    ev.versions, ev.device_name, ev.sandbox = dict(ready.versions), ready.device_name, ready.sandbox
    ev.sandbox_reason = ready.sandbox_reason or ev.sandbox_reason
    diag.set(runner_start_s=round(time.perf_counter() - started, 3), runner_pid=runner.inner_pid,
             runner="spare" if state.spare is not None else "started", transport=session.arena.transport,
             ipc_namespace="shared" if ev.ctx.share_ipc else "private", transport_note=ev.ctx.transport_note or None,
             triton_cache="per-source" if triton_dir is not None else "private")
    return session


def _take_spare(ctx: Context, key: spare_runner.SpareKey) -> spare_runner.Spare | None:
    """The judge's spare runner when it serves this job and is up; one that does not serve it is closed."""
    spare, ctx.spare = ctx.spare, None
    if spare is None:
        return None
    if not spare.key.serves(key):
        with held(ctx.device_lock, SHARED):  # its context's teardown: no timing beside
            spare_runner.discard(spare)
        return None
    return spare if spare_runner.settle(spare) else None


def start_spare(ev: Evaluation) -> None:
    """Start the runner of this judge's next candidate, like this one's (the device held shared)."""
    set_bytes = ev.plan.pool.set_bytes if ev.plan is not None else None
    if ev.ctx.spare is None and ev.runner.spare_key is not None and spare_runner.wanted(ev.device, set_bytes):
        ev.ctx.spare = spare_runner.spawn(ev.ctx, ev.runner.spare_key)


def settle_spare(ev: Evaluation) -> None:
    """Wait, still holding the device shared, for the spare's warm-up to end."""
    if ev.ctx.spare is not None and not spare_runner.settle(ev.ctx.spare):
        ev.ctx.spare = None


def close_runner(ev: Evaluation) -> None:
    """Kill the runner now; its exit, shared memory and a spare's Triton entries wait for after the reply."""
    session, state = ev.session, ev.runner
    session.close(wait=False)

    def gone() -> None:
        session.release()
        spare, state.spare = state.spare, None
        if spare is not None:
            spare_runner.give_back(spare, state.triton_dir)

    ev.ctx.after_reply.append(gone)


def load_candidate(ev: Evaluation, meanwhile: Callable[[], None] | None = None) -> None:
    """Import the candidate within the compile budget (`meanwhile()` runs in the judge); store a reusable CUDA build."""
    session, cand, state, diag = ev.session, ev.candidate, ev.runner, ev.diagnostics
    budget = float(ev.job.compile_timeout or DEFAULT_COMPILE_TIMEOUT)
    try:
        session.load(cand.source, cand.language, cand.entry, ev.precision.to_spec(), budget, meanwhile)
    except CandidateFailure as exc:
        f = exc.original.fault if isinstance(exc.original, RemoteError) else None
        verdict.compile_error(str(exc.original), f.log if f else "")
    except RunnerDied as died:
        if died.kind == "timeout":
            verdict.load_timeout(budget)
        raise
    if languages.get(cand.language).tunes_on_first_call:
        session.tune_budget = budget
    diag.load_seconds = round(session.load_seconds, 3)
    if session.warmup_seconds:
        diag.runner_warmup_s = round(session.warmup_seconds, 3)
    if state.build_key is not None:
        diag.compile_seconds = round(session.load_seconds, 3)
        diag.compile_cache = "hit" if state.build_entry is not None else "miss"
        if state.build_entry is None and build_cache.store(state.build_key, *session.runner.build_location()):
            diag.compile_cache = "stored"
