"""Isolated evaluation workers: one subprocess per device mode, JSON lines over pipes, reused while healthy.

Candidate code is untrusted. It runs in `python -m workbench.worker_main`, never in the caller's process, so a
crash, hang, out-of-memory or illegal memory access ends the worker, not the notebook. The worker's
environment has secrets removed and, on CPU, `TRITON_INTERPRET=1` set before anything imports triton.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from workbench.errors import WorkerError

#: Environment variables never passed to a worker (API keys, tokens, cloud credentials).
_SECRET = re.compile(
    r"(_API_KEY|_TOKEN|_SECRET|SECRET_|PASSWORD|PASSWD|_CREDENTIALS)$|^(AWS_|HF_TOKEN|OPENAI_|ANTHROPIC_|"
    r"GITHUB_TOKEN|GH_TOKEN|HUGGING_FACE_HUB_TOKEN|GOOGLE_APPLICATION_CREDENTIALS)",
)
_KEEP = {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"}

DEFAULT_TIMEOUT = {"cpu": 180.0, "cuda": 90.0}
#: Address-space cap for CPU workers: a huge allocation becomes a clean MemoryError, not a swapped machine.
DEFAULT_CPU_MEMORY_BYTES = int(os.environ.get("KWB_WORKER_MEMORY_GB", "12")) * 2**30


def scrubbed_env(device: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEEP or not _SECRET.search(k.upper())}
    if device.startswith("cuda"):
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env["PYTHONUNBUFFERED"] = "1"
    # The worker must import this very package, also when it runs from a source checkout.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class WorkerDied(Exception):
    """The worker process ended or was killed; `kind` is "timeout" or "crashed"."""

    def __init__(self, kind: str, detail: str, log: str):
        self.kind, self.detail, self.log = kind, detail, log
        super().__init__(detail)


class Worker:
    """One worker subprocess. `request()` sends a JSON job and waits for the JSON reply or the deadline."""

    def __init__(self, device: str, memory_bytes: int | None = None):
        self.device = device
        self.memory_bytes = memory_bytes if memory_bytes is not None else (
            None if device.startswith("cuda") else DEFAULT_CPU_MEMORY_BYTES)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.worker_main"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=scrubbed_env(device), start_new_session=True, preexec_fn=self._limits, bufsize=0,
        )
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()
        self._buffer = b""
        self.jobs = 0

    def _limits(self) -> None:  # runs in the child before exec
        if self.memory_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(list(self.stderr_tail)[-lines:])

    def request(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not self.alive():
            raise WorkerDied("crashed", "worker was not running", self.log_tail())
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stderr_tail.clear()
        self.jobs += 1
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise WorkerDied("crashed", "worker closed its input", self.log_tail()) from exc
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerDied("timeout", f"no answer within {timeout:.0f} s", self.log_tail())
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    code = self.proc.wait(timeout=10)
                    time.sleep(0.05)  # let the stderr reader catch the last lines
                    why = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                    raise WorkerDied("crashed", f"worker process {why}", self.log_tail())
                self._buffer += chunk
            elif not self.alive():
                code = self.proc.returncode
                time.sleep(0.05)
                why = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                raise WorkerDied("crashed", f"worker process {why}", self.log_tail())
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass

    def close(self) -> None:
        if self.alive():
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except Exception:
                pass
        self.kill()


_POOL: dict[str, Worker] = {}
_LOCK = threading.Lock()


def _key(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def get_worker(device: str) -> Worker:
    """The pooled worker for this device mode, started (or replaced) as needed."""
    key = _key(device)
    worker = _POOL.get(key)
    if worker is None or not worker.alive():
        try:
            worker = Worker(device)
        except OSError as exc:  # pragma: no cover
            raise WorkerError(f"could not start an evaluation worker: {exc}") from exc
        _POOL[key] = worker
    return worker


def discard_worker(device: str) -> None:
    """Kill and forget the pooled worker (after a crash, a timeout or a poisoned CUDA context)."""
    worker = _POOL.pop(_key(device), None)
    if worker is not None:
        worker.kill()


def run_job(job: dict[str, Any], device: str, timeout: float) -> dict[str, Any]:
    """Send one job to the device's worker; a dead or hung worker becomes a "timeout"/"crashed" reply."""
    with _LOCK:
        worker = get_worker(device)
        try:
            reply = worker.request(job, timeout)
        except WorkerDied as died:
            discard_worker(device)
            return {"status": died.kind, "died": died.detail, "log": died.log, "worker_pid": worker.pid}
        reply["worker_pid"] = worker.pid
        if reply.pop("restart_worker", False):
            discard_worker(device)
        return reply


def shutdown_workers() -> None:
    for key in list(_POOL):
        worker = _POOL.pop(key)
        worker.close()


atexit.register(shutdown_workers)
