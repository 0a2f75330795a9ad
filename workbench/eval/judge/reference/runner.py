"""The reference timed in a runner of its own, started like the candidate's and mapping the same timing pool, so the two
sides of a speedup differ only in their code. Launched with the pool (replies read when timing starts) and kept with
it; when it cannot start, load or time, the judge times the reference and says why (`reference_timed_in`)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from workbench import languages
from workbench.eval.judge.correctness.check import CandidateFailure
from workbench.eval.judge.runners.libraries import libraries_for
from workbench.eval.judge.runners.process import Limits, RunnerDied, RunnerViolation
from workbench.eval.judge.runners.session import CandidateSession, RemoteError
from workbench.eval.wire import runner_messages as protocol

if TYPE_CHECKING:
    from workbench.eval.judge.context import Context
    from workbench.eval.judge.evaluation import Evaluation
    from workbench.eval.judge.timing.inputs import InputPool

#: Seconds the reference's runner may take to start, load the reference and map the pool, from when timing waits.
READY_TIMEOUT_S = 120.0
#: The judge times the reference itself below this many outputs (runners cache theirs) + TIGHT_MARGIN_BYTES free.
TIGHT_OUTPUTS = 4
TIGHT_MARGIN_BYTES = 2 << 30


def wanted(interpreted: bool) -> bool:
    """Wherever the reference's time decides a verdict (a GPU, the CPU's wall clock: docs/trust-boundary.md), not
    beside Triton's interpreter; `KWB_REFERENCE_RUNNER=1`/`=0` forces it."""
    forced = os.environ.get("KWB_REFERENCE_RUNNER", "").strip()
    return forced == "1" if forced in ("0", "1") else not interpreted


class ReferenceRunnerFailed(Exception):
    """The reference's runner could not start, load the reference, or time it: the judge times it instead."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, CandidateFailure) and isinstance(exc.original, RemoteError):
        fault = exc.original.fault
        return f"the reference raised in its runner ({fault.stage}): {fault.exc_type}: {fault.message[:300]}"
    if isinstance(exc, RunnerDied):
        return f"the reference's runner {exc.kind}: {exc.detail[:300]}"
    if isinstance(exc, RunnerViolation):
        return f"the reference's runner broke the protocol: {exc.detail[:300]}"
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _scratch_slots(session: CandidateSession, pool: InputPool) -> list[Any]:
    """One buffer of the session's own as every set's slot; none where the candidate's output is not copied out."""
    from workbench.eval.judge.timing.batches import copy_out_mirrored

    if not copy_out_mirrored(pool):
        return []
    like = pool.out_like
    _, ref = session.arena.tensor(tuple(like.shape), like.dtype)
    return [ref] * pool.n


class ReferenceRunner:
    """The task's reference, loaded and built in a runner that maps a timing pool."""

    def __init__(self, session: CandidateSession, model_id: int, pool_id: int, warmed: bool = False):
        self.session, self.model_id, self.pool_id, self.is_ready = session, model_id, pool_id, False
        self.warmed = warmed  # an untimed first call was queued after the pool: `ready` reads its reply

    @classmethod
    def launch(cls, ctx: Context, device: str, limits: Limits, timeout: float, pool: InputPool, ref_model: Any,
               source: str, precision: dict[str, Any], init: list[Any], seed: int, sizes: dict[str, Any],
               warm: bool = False) -> ReferenceRunner:
        """Spawn the runner and queue its requests (with `warm`, one untimed call on the pool's last set: see
        `warm_first_call`); ReferenceRunnerFailed when it cannot be spawned or given the pool."""
        if pool.arena is None:
            raise ReferenceRunnerFailed("the timing inputs are nested (lists of tensors): they live in the "
                                        "candidate's own shared memory, which a second runner cannot map")
        try:
            runner = ctx.runner_class(ctx.fork_server, device, limits, [], share_ipc=ctx.share_ipc,
                                      warm=libraries_for(device, source))
        except (RuntimeError, OSError) as exc:
            raise ReferenceRunnerFailed(f"the reference's runner could not be started: {exc}") from None
        runner.role = "reference"
        session = CandidateSession(runner, device, timeout, ctx.transport)
        try:
            session.post_load(source, "torch", "ModelNew", precision)
            model_id = session.post_model(ref_model, init, seed, sizes)
            session.arena.adopt(pool.arena.owned())
            pool_id = session.post_pool(pool.refs, _scratch_slots(session, pool))
            if warm:
                session.post_call(model_id, pool.refs[-1])
        except BaseException as exc:
            session.close()
            if isinstance(exc, (RunnerDied, RunnerViolation, RuntimeError, OSError)):
                raise ReferenceRunnerFailed(_why(exc)) from None
            raise
        return cls(session, model_id, pool_id, warm)

    def answers(self, timeout: float = 5.0) -> bool:
        """Whether a kept runner still answers a ping (its queued replies read first); one that does not is closed."""
        if self.session.runner.closed:
            return False
        try:
            self.ready()
            self.session.ping(timeout)
            return True
        except ReferenceRunnerFailed:
            return False
        except (CandidateFailure, RunnerDied, RunnerViolation, OSError):
            self.close()
            return False

    def ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Read the queued replies (once); the seconds waited. ReferenceRunnerFailed when any of them failed."""
        if self.is_ready:
            return 0.0
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        try:
            self.session.runner.await_ready(deadline)
            for kind in ("loaded", "built", "pong", *(["output"] if self.warmed else [])):
                self.session.collect(kind, deadline)
        except (CandidateFailure, RunnerDied, RunnerViolation, RuntimeError, OSError) as exc:
            self.close()
            raise ReferenceRunnerFailed(_why(exc)) from None
        self.is_ready = True
        return time.perf_counter() - started

    def time(self, order: list[int], seeds: tuple[int, ...], timeout: float) -> tuple[protocol.Samples, float]:
        """One timed batch on the pool (with the judge's bracket, as `CandidateSession.time`)."""
        try:
            return self.session.time(self.model_id, self.pool_id, order, timeout, seeds)
        except (CandidateFailure, RunnerDied, RunnerViolation) as exc:
            self.close()
            raise ReferenceRunnerFailed(_why(exc)) from None

    def members(self) -> list[int]:
        return self.session.runner.members()

    def close(self) -> None:
        """End the runner and give back its shared memory (the pool's buffers are only borrowed)."""
        self.session.close()


def launch_for(ev: Evaluation) -> None:
    """Before the candidate's import: reuse the runner kept with the pool or launch one (`reference_timed_in`)."""
    pool = ev.plan.pool if ev.plan is not None else None
    if pool is None or not wanted(languages.get(ev.candidate.language).interpreted(ev.device)):
        return
    diag = ev.diagnostics
    if pool.reference_runner is not None and pool.reference_runner.answers():
        diag.reference_timed_in = "runner (kept)"
        return
    pool.reference_runner = None
    short = tight(pool, ev.device)
    if short:  # it would be given up at timing anyway: no runner, no weights copied for it
        diag.reference_timed_in = f"judge: {short}"
        return
    from workbench.tasks.kernelbench import reference_as_candidate

    ref = ev.reference()
    try:
        pool.reference_runner = ReferenceRunner.launch(
            ev.ctx, ev.device, Limits(memory_bytes=ev.job.memory_bytes), ev.timeout, pool, ev.reference_model(),
            reference_as_candidate(ev.task).source, ev.precision.to_spec(), ref.init_inputs(ev.time_size, ev.seed),
            ev.seed, {**ref.defaults, **ev.time_size}, warm=not ev.plan.seeded and warm_first_call(pool, ev.device))
        diag.reference_timed_in = "runner"
    except ReferenceRunnerFailed as exc:
        diag.reference_timed_in = f"judge: {exc}"


def warm_first_call(pool: InputPool, device: str) -> bool:
    """Whether the reference's runner makes one untimed call after mapping the pool (the library's algorithm choice paid
    beside the candidate's import, not in the first round); only where it fits beside the check."""
    from workbench.eval.judge.reference.compiled import fits_beside
    from workbench.eval.judge.timing.inputs import free_bytes

    return device.startswith("cuda") and fits_beside(pool.set_bytes, free_bytes(device))


def tight(pool: InputPool, device: str) -> str:
    """Why two runners' outputs would not fit beside the pool now ("" when they do: TIGHT_OUTPUTS)."""
    import torch

    like = pool.out_like
    out = like.numel() * like.element_size() if like is not None else 0
    free = int(torch.cuda.mem_get_info(torch.device(device))[0]) if device.startswith("cuda") else None
    if free is None or free >= TIGHT_OUTPUTS * out + TIGHT_MARGIN_BYTES:
        return ""
    return (f"memory is tight ({free / 2**30:.1f} GiB free, outputs of {out / 2**30:.2f} GiB): the reference was "
            "timed in the judge's process, which gives its cache back before the candidate's batch")


def take_for_timing(ev: Evaluation) -> ReferenceRunner | None:
    """When timing starts: the pool's reference runner, ready; None (none, failed, memory tight): the judge times it."""
    pool = ev.plan.pool if ev.plan is not None else None
    runner = pool.reference_runner if pool is not None else None
    if runner is None:
        return None
    why = tight(pool, ev.device)
    if why:
        pool.drop_reference_runner()  # its weights and context: the candidate needs the memory
    else:
        try:
            ev.diagnostics.reference_runner_wait_s = round(runner.ready(), 3)
            return runner
        except ReferenceRunnerFailed as exc:
            pool.reference_runner, why = None, str(exc)
    ev.diagnostics.reference_timed_in = f"judge: {why}"
    return None


def after_timing(ev: Evaluation) -> None:
    """Forget a reference runner that failed during the timing (it closed itself)."""
    pool = ev.plan.pool if ev.plan is not None else None
    if pool is not None and pool.reference_runner is not None and pool.reference_runner.session.runner.closed:
        pool.reference_runner = None
