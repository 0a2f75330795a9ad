"""The next candidate's runner, started and warmed under a shared device hold while the current one is checked. No
candidate has run in it; its Triton cache is filled from the source's entries when taken and copied back once it is
dead (`build_cache.copy_out`). `KWB_SPARE_RUNNER=0` turns spares off, `=1` on for the CPU too."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.eval.judge.runners import build_cache
from workbench.eval.judge.runners.process import Limits, RunnerProcess
from workbench.eval.wire import runner_messages as protocol

if TYPE_CHECKING:
    from workbench.eval.judge.context import Context

#: Seconds a spare may take to start and warm up before the judge gives it up (`settle`).
SETTLE_TIMEOUT_S = 30.0
#: Largest share of GPU memory a task's timing set may take for a spare to follow it (its context costs memory).
MAX_SET_SHARE = 1 / 32


def wanted(device: str, set_bytes: int | None = None) -> bool:
    """Whether this judge keeps a spare after a task whose timing sets take `set_bytes` each (unknown: not on a GPU)."""
    forced = os.environ.get("KWB_SPARE_RUNNER", "").strip()
    if forced == "0" or (forced != "1" and not device.startswith("cuda")):
        return False
    if not device.startswith("cuda"):
        return True
    if set_bytes is None:
        return False
    import torch

    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    return set_bytes <= MAX_SET_SHARE * total


@dataclass(frozen=True)
class SpareKey:
    """What a runner's start fixes besides the candidate: a spare serves a job only when these match."""

    device: str
    memory_bytes: int | None
    share_ipc: bool
    warm: tuple[str, ...]

    def serves(self, job: SpareKey) -> bool:
        """The same device, limits and IPC namespace, and every library the job wants already loaded."""
        return (self.device, self.memory_bytes, self.share_ipc) == (job.device, job.memory_bytes, job.share_ipc) \
            and set(job.warm) <= set(self.warm)


@dataclass
class Spare:
    key: SpareKey
    runner: RunnerProcess
    triton_dir: Path | None  # the judge-made Triton cache bound writable into the spare (None: compiles privately)
    settled: bool = False


def _own(path: Path) -> None:
    """`path` (and everything below it) given to the runner's user when the judge runs as root."""
    if os.geteuid() != 0:
        return
    from workbench.sandbox.namespaces import NOBODY_GID, NOBODY_UID

    for root, dirs, files in os.walk(path, followlinks=False):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), NOBODY_UID, NOBODY_GID)
    os.chown(path, NOBODY_UID, NOBODY_GID)
    os.chmod(path, 0o700)


def spawn(ctx: Context, key: SpareKey) -> Spare | None:
    """Start a spare for `key` (its Ready and warm-up are read by `settle`); None when it cannot start."""
    triton = None
    if key.device.startswith("cuda"):
        try:
            triton = Path(tempfile.mkdtemp(prefix="spare-triton-", dir=ctx.workdir))
            _own(triton)
        except OSError:
            triton = None
    writable = [(str(triton), build_cache.TRITON_MOUNT)] if triton is not None else []
    try:
        runner = ctx.runner_class(ctx.fork_server, key.device, Limits(memory_bytes=key.memory_bytes), [],
                                  key.share_ipc, writable, key.warm)
    except Exception:  # noqa: BLE001 - no spare: the next candidate starts its runner as before
        if triton is not None:
            shutil.rmtree(triton, ignore_errors=True)
        return None
    runner.role = "spare"
    return Spare(key, runner, triton)


def settle(spare: Spare, timeout: float = SETTLE_TIMEOUT_S) -> bool:
    """Wait for the spare's Ready and warm-up (a Pong follows it); False (the spare closed) if not within `timeout`."""
    if spare.settled:
        return True
    deadline = time.monotonic() + timeout
    try:
        spare.runner.await_ready(deadline)
        spare.runner.send(protocol.Ping(call=0))
        spare.runner.receive({"pong"}, deadline)
    except Exception:  # noqa: BLE001 - a spare that does not come up is dropped, nothing else
        discard(spare)
        return False
    spare.settled = True
    return True


def discard(spare: Spare | None) -> None:
    if spare is None:
        return
    with suppress(Exception):  # it is being thrown away
        spare.runner.close()
    if spare.triton_dir is not None:
        shutil.rmtree(spare.triton_dir, ignore_errors=True)


def _entries(path: Path) -> set[str]:
    try:
        return {e.name for e in os.scandir(path)}
    except OSError:
        return set()


def _copy_entries(src: Path, dest: Path, names: set[str]) -> int:
    """Copy each `src`/name to `dest`/name atomically by `build_cache.copy_out`, skipping refused ones; how many."""
    copied = 0
    for name in sorted(names):
        if name.startswith((".", "tmp.")):  # this copy's own temporaries, a killed compile's leftovers
            continue
        tmp = dest / f".{name}.{os.getpid()}.tmp"
        try:
            build_cache.copy_out(src, name, tmp)
            _own(tmp)
            os.replace(tmp, dest / name)
            copied += 1
        except (OSError, build_cache.RefusedCopy):
            shutil.rmtree(tmp, ignore_errors=True)
    return copied


def fill(spare: Spare, source_dir: Path | None) -> int:
    """Copy the source's Triton cache entries into the spare's directory before its candidate is imported."""
    if spare.triton_dir is None or source_dir is None:
        return 0
    return _copy_entries(source_dir, spare.triton_dir, _entries(source_dir))


def give_back(spare: Spare, source_dir: Path | None) -> int:
    """Once the spare's runner is dead: its new entries copied into the source's cache, its directory removed."""
    copied = 0
    if spare.triton_dir is not None:
        if source_dir is not None:
            copied = _copy_entries(spare.triton_dir, source_dir, _entries(spare.triton_dir) - _entries(source_dir))
        shutil.rmtree(spare.triton_dir, ignore_errors=True)
    return copied
