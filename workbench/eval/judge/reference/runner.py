"""The reference timed in a runner of its own, beside the candidate's, so both sides of a speedup are measured alike.

Why: the judge used to time the reference in its own process and the candidate in a sandboxed runner, and identical
code read differently on the two sides (KernelBench references judged against themselves at 0.73-1.18 on a GPU).
The runner reads its inputs through a CUDA IPC mapping (about 3% slower on a bandwidth-bound kernel than the judge's
own allocation), and a launch-bound network's time depends on the process that launches it (its threads, its
hooks, its allocator's state). A runner started the same way (the same fork server, sandbox and harness), reading
the same pool through the same mapping, with its weights copied in the same way, leaves the two sides differing
only in the code they run.

Trust: only the task's reference runs there, and the task is the judge's, so its clock is the reference's figure
(bounded by the judge's clock like the candidate's). It maps the pool's input sets and, for its outputs, one buffer
of its own that every call's output is copied into: the copy a candidate's runner makes into its slot after each
call is made on the reference's side too (as the judge once copied into a scratch output), and nothing the
reference computes is ever written where a candidate's runner can read it. The outputs the timing's re-checks
compare against are still computed in the judge (`timing.PairTimer`).

Speed: it is launched when the pool is made, before the candidate is imported, and its requests (load, build, map
the pool) are queued at once; their replies are read when timing starts, so its start-up overlaps the candidate's
import and checks. It lives with the pool (`InputPool.reference_runner`) and is kept with it for the next candidate
of the same task, size and seed.

When it cannot start or load the reference (a reference its sandbox refuses), or fails while timing, the judge
times the reference in its own process, as it did before, and the Result says why
(`protocol["reference_timed_in"]`).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from workbench.eval.judge.correctness.check import CandidateFailure
from workbench.eval.judge.runners.libraries import libraries_for
from workbench.eval.judge.runners.process import Limits, RunnerDied, RunnerViolation
from workbench.eval.judge.runners.session import CandidateSession, RemoteError
from workbench.eval.wire import runner_messages as protocol

if TYPE_CHECKING:
    from workbench.eval.judge.evaluation import Evaluation

#: Seconds the reference's runner may take to start, import the reference, build it and map the pool, counted
#: from when the timing starts waiting for it (most of it overlapped the candidate's import and checks).
READY_TIMEOUT_S = 120.0
#: The judge times the reference itself when free device memory at timing is under this many outputs (plus
#: TIGHT_MARGIN_BYTES): each runner keeps its last call's output and temporaries cached between batches, and two
#: of them beside the judge's pool ran an 8 GB problem out of memory. (Asking each runner to give its cache back
#: after every batch kept them in memory but left the driver clearing it under the other side's batch: an A/A
#: pair of a 7 GB InstanceNorm read 0.65.)
TIGHT_OUTPUTS = 4
TIGHT_MARGIN_BYTES = 2 << 30


def wanted(device: str) -> bool:
    """Whether the reference is timed in a runner: on a GPU by default; `KWB_REFERENCE_RUNNER=1` asks for it on the
    CPU too, `=0` times it in the judge everywhere. On the CPU the default stays the judge's process: there both
    sides are timed on one pinned core by the judge's wall clock, and a second runner costs a small machine more
    than the symmetry gains there."""
    forced = os.environ.get("KWB_REFERENCE_RUNNER", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return device.startswith("cuda")


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


def _scratch_slots(session: CandidateSession, pool: Any) -> list[Any]:
    """One output buffer in the reference session's own memory, as every set's slot (module doc); none for an
    output over LARGE_OUTPUT_BYTES, which the judge did not mirror either (`timing_batches.copy_out_mirrored`)."""
    from workbench.eval.judge.timing.batches import copy_out_mirrored

    if not copy_out_mirrored(pool):
        return []
    like = pool.out_like
    _, ref = session.arena.tensor(tuple(like.shape), like.dtype)
    return [ref] * pool.n


class ReferenceRunner:
    """The task's reference, loaded and built in a runner that maps a timing pool (module doc)."""

    def __init__(self, session: CandidateSession, model_id: int, pool_id: int, warmed: bool = False):
        self.session, self.model_id, self.pool_id = session, model_id, pool_id
        self.launched_at = time.perf_counter()
        self.is_ready = False
        #: Whether an untimed first call was queued after the pool (`launch`'s `warm`): its reply is read by `ready`.
        self.warmed = warmed
        #: Evaluations that timed on this runner (1 for the one that launched it).
        self.uses = 0

    @classmethod
    def launch(cls, ctx: Any, device: str, limits: Limits, timeout: float, pool: Any, ref_model: Any, source: str,
               precision: dict[str, Any], init: list[Any], seed: int, sizes: dict[str, Any],
               warm: bool = False) -> ReferenceRunner:
        """Spawn the runner and queue its requests (module doc); raises ReferenceRunnerFailed when it cannot even
        be spawned or the pool cannot be lent to it. `warm`: then one untimed call of the reference on the pool's
        last set (`warm_first_call`)."""
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
        """Whether a kept runner still answers (a ping); one that does not is closed. A runner kept by an evaluation
        that ended before its timing (a candidate that did not compile) has its queued replies read first."""
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
        """Read the replies of the queued requests (once); returns the seconds waited for them. Raises
        ReferenceRunnerFailed (the runner is closed) when any of them failed."""
        if self.is_ready:
            return 0.0
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        try:
            self.session.runner.await_ready(deadline)
            self.session.collect("loaded", deadline)
            self.session.collect("built", deadline)
            self.session.collect("pong", deadline)
            if self.warmed:
                self.session.collect("output", deadline)
        except (CandidateFailure, RunnerDied, RunnerViolation, RuntimeError, OSError) as exc:
            self.close()
            raise ReferenceRunnerFailed(_why(exc)) from None
        self.is_ready = True
        return time.perf_counter() - started

    def time(self, order: list[int], seeds: tuple[int, ...], timeout: float) -> tuple[protocol.Samples, float]:
        """One timed batch of the reference on the pool (the judge's bracket in seconds, as `CandidateSession.time`)."""
        try:
            return self.session.time(self.model_id, self.pool_id, order, timeout, seeds)
        except (CandidateFailure, RunnerDied, RunnerViolation) as exc:
            self.close()
            raise ReferenceRunnerFailed(_why(exc)) from None

    def members(self) -> list[int]:
        return self.session.runner.members()

    def close(self) -> None:
        """End the runner, then give back its shared memory (the pool's buffers are only borrowed: they stay)."""
        self.session.close()


# ---- an evaluation's use of it (as `runner_start.py` starts the candidate's runner) ---------------------------------

def launch_for(ev: Evaluation) -> None:
    """Before the candidate is imported: reuse the runner kept with the evaluation `ev`'s pool, or launch one (module
    doc). `protocol["reference_timed_in"]` says which, or why the judge will time the reference itself."""
    pool = ev.plan.pool if ev.plan is not None else None
    if pool is None or not wanted(ev.device):
        return
    diag = ev.diagnostics
    kept = pool.reference_runner
    if kept is not None and kept.answers():
        diag.reference_timed_in = "runner (kept)"
        return
    pool.reference_runner = None
    short = tight(pool, ev.device)
    if short:  # it would be given up at timing anyway (`take_for_timing`): no runner, no weights copied for it
        diag.reference_timed_in = f"judge: {short}"
        return
    from workbench.tasks.kernelbench import reference_as_candidate

    ref = ev.reference()
    try:
        pool.reference_runner = ReferenceRunner.launch(
            ev.ctx, ev.device, Limits(memory_bytes=ev.job.memory_bytes), ev.timeout, pool,
            ev.reference_model(), reference_as_candidate(ev.task).source, ev.precision.to_spec(),
            ref.init_inputs(ev.time_size, ev.seed), ev.seed, {**ref.defaults, **ev.time_size},
            warm=not ev.plan.seeded and warm_first_call(pool, ev.device))
        diag.reference_timed_in = "runner"
    except ReferenceRunnerFailed as exc:
        diag.reference_timed_in = f"judge: {exc}"


def warm_first_call(pool: Any, device: str) -> bool:
    """Whether the reference's runner makes one untimed call right after mapping the pool, beside the candidate's
    import and checks. Why: the first call of a shape in a fresh process pays cuDNN's (or cuBLAS's) choice of
    algorithm, 0.17 s for KernelBench L2/1's convolution on an H100, which otherwise lands in the timing's first
    round. Only where its output and temporaries fit beside the check as a compile's first call would
    (`reference_compile.fits_beside`): on a problem that fills the device, such a call held an 8 GiB output beside
    the check, whose own copy then took 6.6 s (L1/19). The runner gives the call's memory back before it replies."""
    from workbench.eval.judge.reference.compiled import fits_beside
    from workbench.eval.judge.timing.inputs import free_bytes

    return device.startswith("cuda") and fits_beside(pool.set_bytes, free_bytes(device))


def tight(pool: Any, device: str) -> str:
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
    """When timing starts: the pool's reference runner, ready (its replies read), or None when there is none, it
    failed, or memory is too tight for two runners (`tight`); then the judge times the reference, and the Result
    says why."""
    pool = ev.plan.pool if ev.plan is not None else None
    runner = pool.reference_runner if pool is not None else None
    if runner is None:
        return None
    short = tight(pool, ev.device)
    if short:
        pool.drop_reference_runner()  # its weights and context: the candidate needs the memory
        ev.diagnostics.reference_timed_in = f"judge: {short}"
        return None
    try:
        waited = runner.ready()
    except ReferenceRunnerFailed as exc:
        pool.reference_runner = None
        ev.diagnostics.reference_timed_in = f"judge: {exc}"
        return None
    runner.uses += 1
    ev.diagnostics.reference_runner_wait_s = round(waited, 3)
    return runner


def after_timing(ev: Evaluation) -> None:
    """Forget a reference runner that failed during the timing (it closed itself; the judge finished the timing)."""
    pool = ev.plan.pool if ev.plan is not None else None
    if pool is not None and pool.reference_runner is not None and pool.reference_runner.session.runner.closed:
        pool.reference_runner = None
