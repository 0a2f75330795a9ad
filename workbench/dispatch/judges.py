"""The caller's side of one judge process (`python -m workbench.eval.judge.main`): typed messages over pipes
(`wire/judge_messages.py`), reused while healthy (`pool.py`). The caller never imports a reference or a candidate; a
judge that dies takes its fork server and runner with it; its environment has secrets removed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import workbench
from workbench.dispatch.gpus import cores_for, physical_id
from workbench.dispatch.progress import ProgressRelay
from workbench.eval.wire import judge_messages as wire
from workbench.eval.wire.process_env import apply_timing_env, module_command

#: Environment variables never passed to a judge (credentials of every kind), matched on the upper-cased name.
_SECRET = re.compile(
    r"(_API_KEY|_APIKEY|_TOKEN|_CREDENTIALS?)$|SECRET|PASSWORD|PASSWD|_PRIVATE_KEY|"
    r"^(AWS_|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_|OPENAI_|ANTHROPIC_|GITHUB_TOKEN|GH_TOKEN|"
    r"GOOGLE_APPLICATION_CREDENTIALS|AZURE_OPENAI_)",
)

#: Seconds a candidate's runner may take for any one step after loading (EvalOptions.timeout overrides).
DEFAULT_TIMEOUT = {"cpu": 120.0, "cuda": 60.0}
#: Seconds for loading a candidate, CUDA compilation included (EvalOptions.compile_timeout overrides).
DEFAULT_COMPILE_TIMEOUT = 600.0
#: Seconds a fresh judge may take to import torch and triton before it counts as broken.
STARTUP_TIMEOUT = 180.0
#: Address-space cap of CPU runners (KWB_WORKER_MEMORY_GB overrides; 0: none), so a huge allocation fails cleanly.
DEFAULT_CPU_MEMORY_GB = 8.0
#: Lines of the judge's stderr kept for messages.
LOG_LINES = 50
#: Seconds between checks of the cancel token (and progress ticks) while waiting for the judge.
POLL_SECONDS = 0.2


def cpu_memory_bytes() -> int | None:
    """The CPU runner's address-space cap, read for every evaluation (so tests and users can change it)."""
    gib = float(os.environ.get("KWB_WORKER_MEMORY_GB", DEFAULT_CPU_MEMORY_GB))
    return int(gib * 2**30) if gib > 0 else None


def scrubbed_env(device: str) -> dict[str, str]:
    """The judge's environment: the caller's, minus secrets, with the device mode's Triton setting."""
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k.upper())}
    if device.startswith("cuda"):
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    env["PYTHONUNBUFFERED"] = "1"
    apply_timing_env(env)  # the same OpenMP and malloc behaviour as the runners (wire/process_env.py)
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault prints the Python stack
    # The judge must import this very package, also from a source checkout.
    root = os.path.dirname(os.path.dirname(os.path.abspath(workbench.__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class JudgeDied(Exception):
    """The judge process ended, hung or broke its channel; `kind` is "timeout" or "crashed"."""

    def __init__(self, kind: str, detail: str, log: str):
        self.kind, self.detail, self.log = kind, detail, log
        super().__init__(detail)


class Judge:
    """One judge subprocess. `request(job)` sends a Job and waits for its Reply, relaying Progress; a job's deadline
    starts at the judge's `Ready`, so a slow start-up never eats into a candidate's time."""

    def __init__(self, device: str, peers: int = 1):
        """`device`: "cpu", "cuda", or "cuda:N", which the judge then sees alone (its jobs say "cuda", `job_device`);
        `peers`: how many judges the caller keeps for this device (they share its memory)."""
        self.device = device
        self.job_device = "cuda" if device.startswith("cuda:") else device
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        # Reference modules are written here (real .py files); removed with the judge.
        self.workdir = tempfile.mkdtemp(prefix="kwb_judge_")
        env = scrubbed_env(device)
        env["KWB_WORKDIR"] = self.workdir
        env["KWB_JUDGE_PEERS"] = str(peers)  # the judges of a device share its memory (judge/timing/inputs.py)
        if device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = physical_id(device)
            env["KWB_JUDGE_CORES"] = cores_for(device)
        self.proc = subprocess.Popen(
            module_command("workbench.eval.judge.main", self.job_device),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=True, bufsize=0,
        )
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()
        self._buffer = b""
        self.info: wire.Ready | None = None
        self.jobs = 0

    @property
    def ready(self) -> bool:
        return self.info is not None

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

    def _died(self) -> JudgeDied:
        code = self.proc.wait(timeout=10)
        self._reader.join(timeout=2)  # the last lines (a fault handler's stack) arrive just before EOF
        why = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        return JudgeDied("crashed", f"judge process {why}", self.log_tail())

    def _read_line(self, deadline: float, waiting: Callable[[], None]) -> bytes | None:
        """The next channel line, or None at the deadline; raises JudgeDied when the process ends. `waiting()` runs
        between polls (it may raise: a cancel)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(remaining, POLL_SECONDS))
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self._died()
                self._buffer += chunk
            elif not self.alive():
                raise self._died()
            else:
                waiting()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _decode(self, line: bytes, job: str, allowed: frozenset[str]) -> Any:
        try:
            return wire.decode_line(line, job=job, allowed=allowed)
        except wire.ChannelError as exc:
            self.kill()
            raise JudgeDied("crashed", f"the judge broke its channel: {exc}", self.log_tail()) from None

    def wait_ready(self, timeout: float | None = None, waiting: Callable[[], None] = lambda: None) -> None:
        """Block until the judge has imported its libraries (raises JudgeDied if it cannot)."""
        timeout = STARTUP_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while self.info is None:
            line = self._read_line(deadline, waiting)
            if line is None:
                self.kill()
                raise JudgeDied("crashed", f"the judge did not start within {timeout:.0f} s", self.log_tail())
            self.info = self._decode(line, "", frozenset({"ready"}))

    def request(self, job: wire.Job, timeout: float, relay: ProgressRelay | None = None) -> wire.Reply:
        """Send `job` and wait up to `timeout` seconds (after the judge is ready) for its Reply."""
        relay = relay or ProgressRelay(None)
        if not self.alive():
            raise self._died()
        assert self.proc.stdin is not None
        relay.check_cancel()
        self.wait_ready(waiting=lambda: relay.waiting("startup"))
        self.stderr_tail.clear()
        self.jobs += 1
        job_id = wire.new_job_id()
        try:
            self.proc.stdin.write(wire.encode_line(job, job_id))
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise self._died() from exc
        deadline = time.monotonic() + timeout
        while True:
            line = self._read_line(deadline, relay.waiting)
            if line is None:
                self.kill()
                self._reader.join(timeout=2)
                raise JudgeDied("timeout", f"no answer within {timeout:g} s", self.log_tail())
            message = self._decode(line, job_id, frozenset({"progress", "reply"}))
            if isinstance(message, wire.Reply):
                return message
            relay.deliver(message)

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def close(self) -> None:
        if self.alive():
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
        self.kill()
