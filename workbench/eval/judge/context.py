"""What the judge process keeps between evaluations, and how its runners reach shared memory.

Everything here is trusted, judge-side state reused by every later candidate (docs/verdicts.md, speed): loaded
references, built reference models, the reference's correctness rounds, FLOP/byte counts and compiled references,
each bounded so a study over hundreds of tasks cannot fill the GPU with them.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.judge.device_lock import DeviceLock
from workbench.eval.judge.progress import ProgressHook
from workbench.eval.judge.reference.rounds import ReferenceCache
from workbench.eval.judge.runners.process import RunnerDied, RunnerProcess, RunnerViolation
from workbench.tasks.task import LoadedReference, Task


class Recent(OrderedDict):
    """A dict that keeps only its `limit` most recently set entries."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


def task_key(task: Task) -> str:
    """What the judge's caches are keyed by: the whole task (source, sizes, tolerances, precision, distributions),
    so a changed task never meets an old entry."""
    return hashlib.sha256(json.dumps(task.to_spec(), sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass
class Context:
    """What the judge process provides to an evaluation: its fork server, how shared memory reaches its runners
    (CUDA IPC where the sandbox allows it, else host staging), and the caches of reference work (module doc)."""

    fork_server: Any
    workdir: str
    #: What starts a runner: `RunnerProcess` (a sandboxed process from the fork server); tests of the judge's logic
    #: put a scripted in-process runner with the same interface here (tests/fake_runner.py).
    runner_class: type[RunnerProcess] = RunnerProcess
    transport: str = "auto"
    share_ipc: bool = False
    transport_note: str = ""
    references: dict[str, LoadedReference] = field(default_factory=dict)
    #: Reference models per (task, size, seed, device), FLOP/byte counts per (task, size, device), compiled
    #: references per (task, size, seed, device): the most recent few only.
    models: dict[Any, Any] = field(default_factory=lambda: Recent(4))
    counted: dict[Any, Any] = field(default_factory=lambda: Recent(64))
    compiled: dict[Any, Any] = field(default_factory=lambda: Recent(4))
    rounds: ReferenceCache = field(default_factory=ReferenceCache)
    #: `ctx.progress(stage, step=k, steps=n, ...)` reports where the evaluation stands (judge/progress.py).
    progress: ProgressHook = field(default_factory=ProgressHook)
    #: What timing learned of each reference (its time per call, whether it draws random numbers, the harness
    #: calibration with its age), per (task, size, seed, device): `timing_stage.ReferenceProfile`.
    timing: dict[Any, Any] = field(default_factory=lambda: Recent(16))
    #: The device lock every judge on this machine shares (`device_lock.py`); None: no lock (a judge alone).
    device_lock: DeviceLock | None = None
    #: The last timing pool, kept for the next candidate of the same task, size and seed (`input_pool.py`): one
    #: at most, by its timing key.
    kept_pool: tuple[Any, Any] | None = None
    #: The next candidate's runner, started and warmed up during this one's evaluation (`spare_runner.py`).
    spare: Any = None
    #: What an evaluation leaves for after its reply has gone (`tidy`): waits and releases that decide nothing.
    after_reply: list[Callable[[], Any]] = field(default_factory=list)

    def tidy(self) -> None:
        """Run what the last evaluation left for after its reply (`after_reply`), oldest first, then collect the
        judge's garbage and give its cached GPU memory back to the driver (the next runner, another process, needs
        it): the judge main loop calls it once a reply is sent, and every evaluation before it starts, so the next
        one finds the memory given back. A failure is printed, never raised (the reply is already gone)."""
        jobs, self.after_reply = self.after_reply, []
        if not jobs:
            return
        for job in jobs:
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - the docstring
                print(f"[judge] tidying after a reply failed: {type(exc).__name__}: {exc}", file=sys.stderr,
                      flush=True)
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()

    def take_pool(self, key: Any) -> Any:
        """The kept timing pool of `key` (no longer kept: the caller gives it back with `keep_pool`), or None. A
        pool of another key is freed: it would hold its memory through an evaluation that cannot use it."""
        if self.kept_pool is not None and self.kept_pool[0] == key:
            pool, self.kept_pool = self.kept_pool[1], None
            return pool
        self.release_pool()
        return None

    def keep_pool(self, key: Any, pool: Any) -> None:
        """Keep `pool` (its runner closed) for the next candidate of `key`; the one kept before is freed."""
        if self.kept_pool is not None and self.kept_pool[1] is not pool:
            self.release_pool()
        self.kept_pool = (key, pool)

    def release_pool(self) -> None:
        """Free the kept timing pool (the judge has been idle: `judge/main.py`)."""
        if self.kept_pool is not None:
            self.kept_pool[1].free()
            self.kept_pool = None

    def release_idle(self) -> None:
        """What an idle judge gives back (the kept timing pool with its reference runner, the spare runner), holding
        the device shared: the runners' CUDA contexts are torn down as they exit, which must not land in another
        judge's timed batches."""
        from workbench.eval.judge.device_lock import SHARED, held

        with held(self.device_lock, SHARED):
            self.release_pool()
            self.release_spare()

    def release_spare(self) -> None:
        """Close the spare runner (the judge has been idle, ends, or needs the memory its CUDA context holds)."""
        if self.spare is not None:
            from workbench.eval.judge.runners.spare import discard

            discard(self.spare)
            self.spare = None

    def drop_device_caches(self, task: str = "") -> bool:
        """Forget every cached reference round, model and compiled model (they may hold GPU memory a larger task
        needs); True when any of them belonged to a task other than `task` (a task key): only then can a second
        try of `task` find more memory."""
        keys = [*self.rounds._entries, *self.models, *self.compiled]
        had = any(not (isinstance(k, tuple) and k and k[0] == task) for k in keys)
        self.rounds.clear()
        self.models.clear()
        self.compiled.clear()
        if self.kept_pool is not None:
            had = had or self.kept_pool[0][0] != task
            self.release_pool()
        self.release_spare()
        import gc

        gc.collect()
        try:
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - only frees memory
            pass
        return had

    def reference(self, task: Task) -> LoadedReference:
        key = task_key(task)
        if key not in self.references:
            self.references[key] = LoadedReference(task, self.workdir)
        return self.references[key]


def probe_transport(server: Any, device: str) -> tuple[str, bool, str]:
    """(transport, share the IPC namespace?, note) for GPU runners: CUDA IPC with a private IPC namespace, else
    with the judge's IPC namespace shared (PID, network and mount stay private), else pinned host staging."""
    if not device.startswith("cuda"):
        return "fd", False, ""
    from workbench.eval.wire import runner_messages as protocol
    from workbench.eval.wire.shared_memory import Arena

    notes: list[str] = []
    for share_ipc in (False, True):
        arena = None
        try:
            with RunnerProcess.start(server, device, share_ipc=share_ipc) as runner:
                arena = Arena(device, transport="cuda-ipc")
                t, _ = arena.tensor((4,), torch.float32)
                infos, fds = arena.pending()
                runner.send(protocol.Share(buffers=infos), fds)
                reply = runner.request(protocol.Ping(call=1), {"pong"}, 60)
                if isinstance(reply, protocol.Pong):
                    return "cuda-ipc", share_ipc, "" if not notes else "; ".join(notes)
                why = reply.message if isinstance(reply, protocol.Fault) else reply.kind
                notes.append(f"CUDA IPC {'with' if share_ipc else 'without'} a shared IPC namespace: {why[:200]}")
        except (RunnerDied, RunnerViolation, RuntimeError, OSError) as exc:
            notes.append(f"CUDA IPC {'with' if share_ipc else 'without'} a shared IPC namespace: {exc}")
        finally:
            if arena is not None:
                arena.close()
    return "fd", False, "host staging (" + "; ".join(notes) + ")"
