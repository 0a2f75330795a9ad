"""The caller's side: one judge process per device mode (`python -m workbench.eval.judge.main`), JSON lines over pipes,
reused while healthy.

The judge is trusted but still a separate process: the notebook never imports a reference or a candidate, and a
judge that dies (or is killed to cancel a run) takes its fork server and the candidate's runner with it. Candidate
code never runs in the judge either: each candidate gets a fresh sandboxed runner (`runner_process.py`). The
judge's environment has secrets removed; a runner's is built from an allow-list.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from workbench.errors import WorkerError
from workbench.eval.wire.process_env import apply_timing_env

#: Environment variables never passed to a worker: API keys, tokens, secrets, passwords, cloud and model-hub
#: credentials. Matched on the upper-cased name.
_SECRET = re.compile(
    r"(_API_KEY|_APIKEY|_TOKEN|_CREDENTIALS?)$|SECRET|PASSWORD|PASSWD|_PRIVATE_KEY|"
    r"^(AWS_|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_|OPENAI_|ANTHROPIC_|GITHUB_TOKEN|GH_TOKEN|"
    r"GOOGLE_APPLICATION_CREDENTIALS|AZURE_OPENAI_)",
)

#: Seconds a candidate's runner may take for any one step after loading (evaluate(timeout=...) overrides).
DEFAULT_TIMEOUT = {"cpu": 120.0, "cuda": 60.0}
#: Seconds for loading a candidate, CUDA compilation included (evaluate(compile_timeout=...) overrides).
DEFAULT_COMPILE_TIMEOUT = 600.0
#: Seconds a fresh worker may take to import torch and triton before it counts as broken.
STARTUP_TIMEOUT = 180.0
#: Default address-space cap for CPU runners (KWB_WORKER_MEMORY_GB overrides; 0 = no cap): a huge allocation
#: becomes a clean "out of memory" status instead of swapping the machine.
DEFAULT_CPU_MEMORY_GB = 8.0
#: A worker is replaced after this many evaluations, so module and kernel caches of old candidates cannot grow
#: without bound.
MAX_JOBS_PER_WORKER = 200
#: Lines of the worker's stderr kept for messages (the candidate's prints and tracebacks land there).
LOG_LINES = 50


def cpu_memory_bytes() -> int | None:
    """The CPU runner's address-space cap, read for every evaluation (so tests and users can change it)."""
    gib = float(os.environ.get("KWB_WORKER_MEMORY_GB", DEFAULT_CPU_MEMORY_GB))
    return int(gib * 2**30) if gib > 0 else None


def scrubbed_env(device: str) -> dict[str, str]:
    """The worker's environment: the caller's, minus secrets, with the device mode's Triton setting."""
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k.upper())}
    if device.startswith("cuda"):
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env["PYTHONUNBUFFERED"] = "1"
    apply_timing_env(env)  # the same OpenMP and malloc behaviour as the runners (process_env.py)
    # A segfault then prints the Python stack (with the candidate's file and line) to stderr before dying.
    env["PYTHONFAULTHANDLER"] = "1"
    # The worker must import this very package, also when it runs from a source checkout.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
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


def _decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise WorkerDied("crashed", "the worker wrote an unreadable reply on its protocol channel "
                                    f"({line[:120]!r})", "")
    return message


class Worker:
    """One worker subprocess. `request()` sends a JSON job and waits for the JSON reply or the deadline.

    The worker announces itself with a `{"ready": ...}` line once torch and triton are imported; the
    evaluation's deadline starts then, so a slow start-up never eats into a candidate's time.
    """

    def __init__(self, device: str):
        self.device = device
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        # Candidate and reference modules are written here (real .py files); removed with the worker.
        self.workdir = tempfile.mkdtemp(prefix="kwb_worker_")
        env = scrubbed_env(device)
        env["KWB_WORKDIR"] = self.workdir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.eval.judge.main", device],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=True, bufsize=0,
        )
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()
        self._buffer = b""
        self.ready = False
        self.info: dict[str, Any] = {}
        self.jobs = 0

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = LOG_LINES) -> str:
        return "\n".join(list(self.stderr_tail)[-lines:])

    def _died(self) -> WorkerDied:
        code = self.proc.wait(timeout=10)
        self._reader.join(timeout=2)  # the last lines (a fault handler's stack) arrive just before EOF
        why = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        return WorkerDied("crashed", f"worker process {why}", self.log_tail())

    def _read_line(self, deadline: float) -> bytes | None:
        """The next protocol line, or None at the deadline; raises WorkerDied when the process ends."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self._died()
                self._buffer += chunk
            elif not self.alive():
                raise self._died()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the judge has imported its libraries (raises WorkerDied if it cannot)."""
        timeout = STARTUP_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self.ready:
            line = self._read_line(deadline)
            if line is None:
                self.kill()
                raise WorkerDied("crashed", f"the worker did not start within {timeout:.0f} s", self.log_tail())
            message = _decode(line)
            if "ready" in message:
                self.ready, self.info = True, message

    def request(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not self.alive():
            raise self._died()
        assert self.proc.stdin is not None
        self.wait_ready()
        self.stderr_tail.clear()
        self.jobs += 1
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise self._died() from exc
        line = self._read_line(time.monotonic() + timeout)
        if line is None:
            self.kill()
            self._reader.join(timeout=2)
            raise WorkerDied("timeout", f"no answer within {timeout:g} s", self.log_tail())
        try:
            return _decode(line)
        except WorkerDied:
            self.kill()
            raise

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
        shutil.rmtree(self.workdir, ignore_errors=True)

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


def _replace(device: str) -> None:
    """Discard the device's worker and start its successor now: its imports overlap the caller's own work,
    so the next evaluation after a crash does not wait for torch and triton to load."""
    discard_worker(device)
    try:
        _POOL[_key(device)] = Worker(device)
    except OSError:  # pragma: no cover - get_worker retries and reports
        pass


def run_job(job: dict[str, Any], device: str, timeout: float) -> dict[str, Any]:
    """Send one job to the device's worker; a dead or hung worker becomes a "timeout"/"crashed" reply."""
    with _LOCK:
        worker = get_worker(device)
        try:
            reply = worker.request(job, timeout)
        except WorkerDied as died:
            if not worker.ready:  # no candidate code ran: the environment is broken, not the kernel
                discard_worker(device)
                raise WorkerError(
                    f"the evaluation worker could not start ({died.detail}). Run `kwb doctor`, and check that "
                    f"`{sys.executable} -m workbench.eval.judge.main` imports torch and triton.\nLast worker output:\n{died.log}") from None
            _replace(device)
            return {"status": died.kind, "died": died.detail, "log": died.log, "worker_pid": worker.pid}
        reply["worker_pid"] = worker.pid
        if worker.jobs >= MAX_JOBS_PER_WORKER:
            _replace(device)
        return reply


def shutdown_workers() -> None:
    for key in list(_POOL):
        worker = _POOL.pop(key)
        worker.close()


atexit.register(shutdown_workers)
