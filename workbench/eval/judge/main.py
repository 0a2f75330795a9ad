"""The judge process (trusted, never imports candidate code): reads `Job`s from the caller as JSON lines on stdin,
runs each as an `Evaluation`, and answers with `Progress` lines when asked and one `Reply` per job on a private
duplicate of stdout (its own stdout goes to stderr, so nothing a reference prints can corrupt a message)."""

# ruff: noqa: E402 - the judge's cores are set before torch and everything that imports it (`apply_judge_cores`)
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import gc
import json
import os
import queue
import sys
import tempfile
import threading
import time
from typing import IO, Any


def apply_judge_cores() -> None:
    """Keep to the cores the caller gave this judge (`KWB_JUDGE_CORES`, `dispatch/gpus.cores_for`)."""
    raw = os.environ.get("KWB_JUDGE_CORES", "").strip()
    if raw and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError, ValueError):  # cores gone or not allowed: run where the judge may
            os.sched_setaffinity(0, {int(c) for c in raw.split(",")})


apply_judge_cores()  # before torch starts its threads: a judge of one of several GPUs keeps to that GPU's cores

from workbench.eval.judge.runners.process import ForkServer  # noqa: I001 - imports no torch


def _spawn_fork_server() -> ForkServer | None:
    """The fork server, started before this process imports torch so both start at once (`_start` waits for it)."""
    if __name__ != "__main__":
        return None
    try:
        return ForkServer(sys.argv[1] if len(sys.argv) > 1 else "cpu", wait=False)
    except OSError:  # started again in `_start`, where a failure is reported
        return None


_EARLY_SERVER = _spawn_fork_server()

import torch

from roofline.counting import count_work
from workbench.eval.judge import verdict
from workbench.eval.judge.context import Context, probe_transport
from workbench.eval.judge.correctness import compare_fused
from workbench.eval.judge.device_lock import DeviceLock
from workbench.eval.judge.evaluation import Evaluation
from workbench.eval.wire import judge_messages as wire
from workbench.eval.wire.process_env import versions
from workbench.eval.wire.timed_loop import cpu_timing_threads

_WRITE_LOCK = threading.Lock()
_CHANNEL: IO[bytes] | None = None


def _open_channel() -> None:
    """The message channel a private duplicate of stdout; fd 1 (and sys.stdout) pointed at stderr."""
    global _CHANNEL
    _CHANNEL = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _send(message: wire.Job | wire.Progress | wire.Reply | wire.Ready, job: str) -> None:
    line = wire.encode_line(message, job)
    with _WRITE_LOCK:
        assert _CHANNEL is not None
        _CHANNEL.write(line)
        _CHANNEL.flush()


def _die_with_the_caller() -> None:
    """The judge runs in its own session, so it gets none of the caller's signals: when the caller is gone, the judge
    exits (its fork server and runners die with it) rather than keep its GPU memory."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True, name="kwb-caller-watch").start()


class ReportedEvaluation(Evaluation):
    """An Evaluation that reports each stage it enters (and the enclosing one again when a nested one ends)."""

    def _stage(self, name: str, fn: Any, *args: Any) -> Any:
        outer = getattr(self, "_current_stage", "")
        self._current_stage = name
        self.ctx.progress(name)
        try:
            return super()._stage(name, fn, *args)
        finally:
            self._current_stage = outer
            if outer:
                self.ctx.progress(outer)


def _evaluate(job: wire.Job, ctx: Context) -> dict[str, Any]:
    """One evaluation; with KWB_JUDGE_PROFILE=FOLDER under cProfile, its stats written there."""
    folder = os.environ.get("KWB_JUDGE_PROFILE")
    if not folder:
        return ReportedEvaluation(job, ctx).run()
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(ReportedEvaluation(job, ctx).run)
    finally:
        os.makedirs(folder, exist_ok=True)
        profiler.dump_stats(os.path.join(folder, f"judge-{time.strftime('%H%M%S')}-{os.getpid()}.prof"))


def _warm_counting(device: str) -> None:
    """First uses, paid in a thread before the first job: a FLOP count, and on a GPU Dynamo (memory bookings use it)."""
    def warm() -> None:
        with contextlib.suppress(Exception):  # only a warm-up
            count_work(torch.nn.Linear(4, 4), [torch.zeros(2, 4)])
            if device.startswith("cuda"):
                __import__("torch._dynamo")

    threading.Thread(target=warm, name="kwb-warm-counting", daemon=True).start()


def _stack_watch() -> tuple[float, IO[str]] | None:
    """KWB_JUDGE_STACKS=SECONDS: every thread's stack every SECONDS of a job, to stderr or KWB_JUDGE_STACKS_FILE."""
    try:
        seconds = float(os.environ.get("KWB_JUDGE_STACKS", ""))
    except ValueError:
        return None
    if seconds <= 0:
        return None
    path = os.environ.get("KWB_JUDGE_STACKS_FILE")
    return seconds, (open(path, "a") if path else sys.stderr)  # noqa: SIM115 - lives as long as the judge


_STACKS: tuple[float, IO[str]] | None = None


def answer(job: wire.Job, job_id: str, ctx: Context) -> wire.Reply:
    """`job`'s Reply with the judge's own seconds (a caller's wall time beyond them is the queue and the transport)."""
    started = time.perf_counter()
    ctx.progress.start((lambda message: _send(message, job_id)) if job.progress else None)
    if _STACKS is not None:
        faulthandler.dump_traceback_later(_STACKS[0], repeat=True, file=_STACKS[1])
    try:
        evaluated = _evaluate(job, ctx)
        evaluated["diagnostics"].evaluation_s = round(time.perf_counter() - started, 3)
        reply = verdict.reply({**evaluated, "judge_pid": os.getpid()})
    finally:
        if _STACKS is not None:
            faulthandler.cancel_dump_traceback_later()
        ctx.progress.stop()
    return dataclasses.replace(reply, diagnostics=dataclasses.replace(
        reply.diagnostics, judge_s=round(time.perf_counter() - started, 3)))


def _start(device: str) -> tuple[ForkServer, Context]:
    if not device.startswith("cuda"):
        cpu_timing_threads()
    else:
        torch.cuda.init()  # else every manual_seed queues its CUDA half (benchmarks/README.md)
    _warm_counting(device)
    server = (_EARLY_SERVER or ForkServer(device, wait=False)).ready()
    ctx = Context(fork_server=server, workdir=tempfile.mkdtemp(prefix="kwb_judge_"), device_lock=DeviceLock(device))
    compare_fused.start_warmup(device, ctx.device_lock)
    ctx.transport, ctx.share_ipc, ctx.transport_note = probe_transport(server, device)
    return server, ctx


def main() -> None:
    global _STACKS
    _open_channel()
    _STACKS = _stack_watch()
    _die_with_the_caller()
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    server, ctx = _start(device)
    gc.freeze()
    _send(wire.Ready(pid=os.getpid(), versions=versions(), sandbox=server.sandbox, sandbox_reason=server.reason,
                     transport=ctx.transport, transport_note=ctx.transport_note), "")
    lines = _job_lines()
    try:
        while True:
            try:
                line = lines.get(timeout=POOL_IDLE_S if ctx.kept_pool is not None or ctx.spare is not None else None)
            except queue.Empty:  # no job for a while: the kept timing pool's memory and the spare runner go back
                ctx.release_idle()
                continue
            if line is None:
                break
            if not line.strip():
                continue
            try:
                job_id, job = wire.decode_job(line)
            except wire.ChannelError as exc:  # answer on the id it gave, if any, so the caller is not left waiting
                _send(verdict.judge_error(exc, os.getpid()), _loose_job_id(line))
                continue
            try:
                if not server.alive():
                    server = ctx.fork_server = ForkServer(device)
                reply = answer(job, job_id, ctx)
            except BaseException as exc:  # a reply must always come back
                reply = verdict.judge_error(exc, os.getpid())
            _send(reply, job_id)
            ctx.tidy()  # after the reply: its caller does not wait for the runner's exit (`close_runner`)
    finally:
        ctx.tidy()
        ctx.release_spare()
        server.close()


#: Seconds an idle judge keeps its timing pool and spare runner (for a sweep's next candidate) before freeing them.
POOL_IDLE_S = float(os.environ.get("KWB_POOL_IDLE_S") or 10.0)


def _job_lines() -> queue.Queue[str | None]:
    """Job lines read by a thread, so the main thread can time out to free what it keeps (None: the caller closed)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="kwb-judge-jobs", daemon=True).start()
    return lines


def _loose_job_id(line: str) -> str:
    try:
        return str(json.loads(line).get("job", ""))
    except (ValueError, AttributeError):
        return ""


if __name__ == "__main__":
    main()
