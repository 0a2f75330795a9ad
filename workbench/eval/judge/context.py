"""What the judge keeps between evaluations (references, models, rounds, counts, compiled references, timing pool,
spare runner), each bounded so hundreds of tasks cannot fill the GPU; how runners reach shared memory."""

from __future__ import annotations

import gc
import hashlib
import json
import sys
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.judge.device_lock import SHARED, DeviceLock, held
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
    """What the judge's caches are keyed by: the whole task, so a changed task never meets an old entry."""
    return hashlib.sha256(json.dumps(task.to_spec(), sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass
class Context:
    """What the judge process provides to an evaluation (module doc)."""

    fork_server: Any
    workdir: str
    #: What starts a runner; tests put a scripted one with the same interface here (tests/fake_runner.py).
    runner_class: type[RunnerProcess] = RunnerProcess
    transport: str = "auto"
    share_ipc: bool = False
    transport_note: str = ""
    references: dict[str, LoadedReference] = field(default_factory=dict)
    models: dict[Any, Any] = field(default_factory=lambda: Recent(4))
    counted: dict[Any, Any] = field(default_factory=lambda: Recent(64))
    compiled: dict[Any, Any] = field(default_factory=lambda: Recent(4))
    rounds: ReferenceCache = field(default_factory=ReferenceCache)
    progress: ProgressHook = field(default_factory=ProgressHook)
    #: `timing_stage.ReferenceProfile` per (task, size, seed, device).
    timing: dict[Any, Any] = field(default_factory=lambda: Recent(16))
    bookings: dict[Any, int] = field(default_factory=lambda: Recent(64))  # bytes a large evaluation books
    device_lock: DeviceLock | None = None
    #: (timing key, pool): the last timing pool, kept for the next candidate of the same task, size and seed.
    kept_pool: tuple[Any, Any] | None = None
    spare: Any = None  # the next candidate's runner (`runners/spare.py`)
    after_reply: list[Callable[[], Any]] = field(default_factory=list)

    def tidy(self) -> None:
        """Run what the last evaluation left for after its reply, then free cached GPU memory; failures only printed."""
        jobs, self.after_reply = self.after_reply, []
        if not jobs:
            return
        for job in jobs:
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - the docstring
                print(f"[judge] tidying after a reply failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()

    def take_pool(self, key: Any) -> Any:
        """The kept timing pool of `key` (kept again with `keep_pool`), or None; a pool of another key is freed."""
        if self.kept_pool is not None and self.kept_pool[0] == key:
            pool, self.kept_pool = self.kept_pool[1], None
            return pool
        self.release_pool()
        return None

    def keep_pool(self, key: Any, pool: Any) -> None:
        """Keep `pool` for the next candidate of `key`; the one kept before is freed."""
        if self.kept_pool is not None and self.kept_pool[1] is not pool:
            self.release_pool()
        self.kept_pool = (key, pool)

    def release_pool(self) -> None:
        if self.kept_pool is not None:
            self.kept_pool[1].free()
            self.kept_pool = None

    def release_idle(self) -> None:
        """What an idle judge gives back, holding the device shared: runners' CUDA teardown stays out of timings."""
        with held(self.device_lock, SHARED):
            self.release_pool()
            self.release_spare()

    def release_spare(self) -> None:
        if self.spare is not None:
            from workbench.eval.judge.runners.spare import discard

            discard(self.spare)
            self.spare = None

    def drop_device_caches(self, task: str = "") -> bool:
        """Forget cached rounds and models; True when any was another task's (only then may a retry find memory)."""
        keys = [*self.rounds._entries, *self.models, *self.compiled]
        had = any(not (isinstance(k, tuple) and k and k[0] == task) for k in keys)
        for cache in (self.rounds, self.models, self.compiled):
            cache.clear()
        if self.kept_pool is not None:
            had = had or self.kept_pool[0][0] != task
            self.release_pool()
        self.release_spare()
        gc.collect()
        with suppress(Exception):  # only frees memory
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        return had

    def reference(self, task: Task) -> LoadedReference:
        key = task_key(task)
        if key not in self.references:
            self.references[key] = LoadedReference(task, self.workdir)
        return self.references[key]


def probe_transport(server: Any, device: str) -> tuple[str, bool, str]:
    """(transport, share the IPC namespace?, note) for GPU runners: CUDA IPC (own namespace, else shared), else fd."""
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
                    return "cuda-ipc", share_ipc, "; ".join(notes)
                why = (reply.message if isinstance(reply, protocol.Fault) else reply.kind)[:200]
        except (RunnerDied, RunnerViolation, RuntimeError, OSError) as exc:
            why = str(exc)
        finally:
            if arena is not None:
                arena.close()
        notes.append(f"CUDA IPC {'with' if share_ipc else 'without'} a shared IPC namespace: {why}")
    return "fd", False, "host staging (" + "; ".join(notes) + ")"
