"""The judge's handle on runners: the fork server it owns, and one `RunnerProcess` per candidate (spawned through
the server, spoken to in framed messages, killed with everything it started). A runner that dies, falls silent or
breaks the protocol raises `RunnerDied` or `RunnerViolation` here."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from workbench.eval.wire import forkserver_messages as server_messages
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire.process_env import module_command, runner_env
from workbench.eval.wire.transport import BoundedLog, Channel, ChannelClosed, ChannelTimeout, FrameError

#: Seconds the fork server may take to import torch and triton.
FORKSERVER_STARTUP_S = 180.0
#: Seconds a forked runner may take to sandbox itself and say Ready.
RUNNER_STARTUP_S = 60.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuUse:
    """What the runner's processes have used so far, as the kernel counts it: live threads, CPU seconds (10 ms ticks,
    exited threads included), and the `schedstat` nanoseconds of its main thread and of its other live threads."""

    threads: int
    seconds: float
    main_ns: int = 0
    others_ns: int = 0


def _thread_ns(pid: int, tid: str) -> int | None:
    """CPU nanoseconds thread `tid` of `pid` has used (None where /proc does not say: an exited thread)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_ns(pid: int) -> int | None:
    """CPU nanoseconds every live thread of `pid` has used, from /proc (None where it does not say): nothing the
    runner controls. A thread that exits during a call takes its time with it, so this is a lower bound."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    used = [ns for ns in (_thread_ns(pid, tid) for tid in threads) if ns is not None]
    return sum(used) if used else None


class RunnerDied(Exception):
    """The runner ended or fell silent. `kind`: "timeout" or "crashed"; `detail`: signal or exit code."""

    def __init__(self, kind: str, detail: str, log: str):
        self.kind, self.detail, self.log = kind, detail, log
        super().__init__(detail)


class RunnerViolation(Exception):
    """The runner sent something that is not the protocol (forged, replayed, malformed or unexpected)."""

    def __init__(self, detail: str, log: str):
        self.detail, self.log = detail, log
        super().__init__(detail)


def describe_status(status: int) -> str:
    if status < 0:
        return "ended (status unknown)"
    if not os.WIFSIGNALED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    with suppress(ValueError):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"killed by signal {os.WTERMSIG(status)}"


def _pids_where(match: Callable[[int], bool]) -> list[int]:
    """Every PID in /proc for which `match` holds (a process that ends meanwhile is left out)."""
    found = []
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        with suppress(OSError):
            if match(pid):
                found.append(pid)
    return found


def package_root() -> str:
    """The directory holding the `workbench` package the judge runs (the fork server imports it from there)."""
    import workbench

    return os.path.dirname(os.path.dirname(os.path.abspath(workbench.__file__)))


class ForkServer:
    """The judge's fork server process (trusted), started with the runner's allow-listed environment."""

    def __init__(self, device: str, wait: bool = True):
        """Start the server; `wait=False` returns before its hello (`ready`) so the caller starts beside its imports."""
        self.device = device
        self.channel, theirs = Channel.pair()
        env = runner_env(device)
        env.update(PYTHONPATH=package_root(), HOME=tempfile.gettempdir())
        if os.environ.get("KWB_SANDBOX"):  # e.g. "none": a user's explicit choice reaches the server
            env["KWB_SANDBOX"] = os.environ["KWB_SANDBOX"]
        self.proc = subprocess.Popen(module_command("workbench.eval.runner.forkserver", str(theirs.fileno())),
                                     pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=2,
                                     start_new_session=True)
        theirs.close()
        self._lock = threading.Lock()
        self.sandbox, self.reason, self._hello = "", "", False
        if wait:
            self.ready()

    def ready(self) -> ForkServer:
        """Wait for the server's hello (its sandbox probe); RuntimeError if it does not come."""
        if self._hello:
            return self
        try:
            frame, _ = self.channel.recv(time.monotonic() + FORKSERVER_STARTUP_S)
            hello = server_messages.decode(frame, frozenset({"hello"}))
        except (ChannelClosed, ChannelTimeout, FrameError, server_messages.ProtocolError) as exc:
            self.close()
            raise RuntimeError(f"the fork server did not start ({type(exc).__name__}: {exc})") from exc
        assert isinstance(hello, server_messages.Hello)
        self.sandbox, self.reason, self._hello = hello.sandbox, hello.reason, True
        return self

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, request: server_messages.Message, reply_kind: str, fds: tuple[int, ...] = (),
             timeout: float = 60.0) -> server_messages.Message:
        """Send one request and return its reply, which must be of `reply_kind` (Refused raises RuntimeError)."""
        with self._lock:
            self.channel.send(server_messages.encode(request), fds)
            frame, extra = self.channel.recv(time.monotonic() + timeout)
        for fd in extra:
            os.close(fd)
        reply = server_messages.decode(frame, frozenset({reply_kind, "refused"}))
        if isinstance(reply, server_messages.Refused):
            raise RuntimeError(f"the fork server refused {request.kind}: {reply.reason}")
        return reply

    def close(self) -> None:
        with suppress(Exception):
            self.channel.send(server_messages.encode(server_messages.Exit()))
        self.channel.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


@dataclass
class Limits:
    """What a runner may use; `memory_bytes` caps its address space (CPU only)."""

    memory_bytes: int | None = None
    cpu_seconds: int = 3600
    scratch_bytes: int = 1 << 30


class RunnerProcess:
    """One candidate's runner. Use as a context manager: `with RunnerProcess.start(server, ...) as runner:`."""

    def __init__(self, server: ForkServer, device: str, limits: Limits, extra_binds: list[tuple[str, str]],
                 share_ipc: bool = False, writable_binds: list[tuple[str, str]] | None = None,
                 warm: tuple[str, ...] = ()):
        self.server, self.device = server, device
        self.job, self.nonce = protocol.new_nonce()[:12], protocol.new_nonce()
        self.seq_out = self.seq_in = 0
        self.channel, theirs = Channel.pair()
        log_r, log_w = os.pipe()
        self.log = BoundedLog(log_r)
        self.workdir = tempfile.mkdtemp(prefix="kwb_runner_") if server.sandbox != "namespaces" else None
        request = server_messages.Spawn(
            job=self.job, nonce=self.nonce, device=device, address_space=limits.memory_bytes, share_ipc=share_ipc,
            cpu_seconds=limits.cpu_seconds, scratch_bytes=limits.scratch_bytes, warm=tuple(warm),
            extra_binds=tuple((str(a), str(b)) for a, b in extra_binds), workdir=self.workdir or "",
            writable_binds=tuple((str(a), str(b)) for a, b in writable_binds or []))
        try:
            reply = server.call(request, "spawned", (theirs.fileno(), log_w))
        finally:
            theirs.close()
            os.close(log_w)
        assert isinstance(reply, server_messages.Spawned)
        self.pid, self.inner_pid = reply.pid, reply.inner_pid
        self.sandbox, self.sandbox_reason = reply.sandbox, reply.reason
        self.ready: protocol.Ready | None = None
        self.closed = self.frozen = False
        self._status: int | None = None
        self.role = "runner"  # whose runner this is: the candidate's ("runner"), the reference's or a spare

    @classmethod
    def start(cls, server: ForkServer, device: str, limits: Limits | None = None,
              extra_binds: list[tuple[str, str]] | None = None, share_ipc: bool = False,
              writable_binds: list[tuple[str, str]] | None = None, warm: tuple[str, ...] = ()) -> RunnerProcess:
        """`extra_binds` are bound read-only into the sandbox, `writable_binds` writable (a source's own Triton
        cache); `warm`: the GPU libraries it loads after Ready (`libraries.py`)."""
        runner = cls(server, device, limits or Limits(), list(extra_binds or []), share_ipc, writable_binds, warm)
        runner.await_ready()
        return runner

    def await_ready(self, deadline: float | None = None) -> protocol.Ready:
        """The runner's Ready, read once (the runner is closed when it does not come or speaks another protocol)."""
        if self.ready is not None:
            return self.ready
        try:
            ready = self.receive({"ready"}, deadline if deadline is not None else time.monotonic() + RUNNER_STARTUP_S)
        except BaseException:
            self.close()
            raise
        assert isinstance(ready, protocol.Ready)
        if tuple(ready.protocol) != protocol.PROTOCOL:
            self.close()
            raise RunnerViolation(f"runner speaks protocol {ready.protocol}, judge {protocol.PROTOCOL}", "")
        self.ready = ready
        return ready

    def __enter__(self) -> RunnerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send(self, message: protocol.Message, fds: list[int] | tuple[int, ...] = ()) -> None:
        self.seq_out += 1
        try:
            self.channel.send(protocol.encode(message, self.job, self.nonce, self.seq_out), fds)
        except ChannelClosed:
            raise self._died() from None

    def receive(self, kinds: set[str], deadline: float) -> protocol.Message:
        """The next message, which must be one of `kinds` (or a Fault)."""
        try:
            frame, fds = self.channel.recv(deadline)
            for fd in fds:  # a runner never sends descriptors
                os.close(fd)
            self.seq_in += 1
            message = protocol.decode(frame, job=self.job, nonce=self.nonce, seq=self.seq_in,
                                      allowed=frozenset(kinds | {"fault"}))
            if fds:
                raise protocol.ProtocolError("the runner sent file descriptors")
        except ChannelTimeout:
            self.kill()
            raise RunnerDied("timeout", "no answer before the deadline", self.log_tail()) from None
        except ChannelClosed:
            raise self._died() from None
        except (FrameError, protocol.ProtocolError) as exc:
            self.kill()
            raise RunnerViolation(str(exc), self.log_tail()) from None
        return message

    def answers_within(self, seconds: float) -> bool:
        """Whether the runner's next message arrives within `seconds` (it is not read)."""
        try:
            return self.channel.readable(seconds)
        except (OSError, ValueError):  # a closed channel: the next receive says how the runner ended
            return True

    def request(self, message: protocol.Message, kinds: set[str], timeout: float,
                fds: list[int] | tuple[int, ...] = ()) -> protocol.Message:
        self.send(message, fds)
        return self.receive(kinds, time.monotonic() + timeout)

    def build_location(self) -> tuple[str, str]:
        """(root, path below it) of the runner's CUDA build directory as the judge reaches it: through its sandbox's
        root in /proc, or without one its scratch (`build_cache.store` walks below the root)."""
        if self.workdir:
            return os.path.dirname(self.workdir), os.path.join(os.path.basename(self.workdir), "torch_extensions")
        return f"/proc/{self.inner_pid}/root", "tmp/torch_extensions"

    def log_tail(self, lines: int = 50) -> str:
        self.log.join(0.2)
        return self.log.tail(lines)

    def _died(self) -> RunnerDied:
        status = self.wait_status()
        self.log.join(2.0)  # the last lines (a fault handler's stack) arrive just before EOF
        return RunnerDied("crashed", f"runner process {describe_status(status)}", self.log.tail())

    def wait_status(self) -> int:
        if self._status is None:
            try:
                reply = self.server.call(server_messages.Wait(pid=self.pid), "status", timeout=15)
                assert isinstance(reply, server_messages.Status)
                self._status = reply.status
            except Exception:
                with suppress(ProcessLookupError):  # its first child is stuck: end it too
                    os.kill(self.pid, signal.SIGKILL)
                self._status = -1
        return self._status

    def members(self) -> list[int]:
        """Outer PIDs of every process of the runner: its PID namespace, or without a sandbox its process group."""
        if self.sandbox != "namespaces":
            return _pids_where(lambda pid: os.getpgid(pid) == self.pid) or [self.pid]
        try:
            target = os.readlink(f"/proc/{self.inner_pid}/ns/pid")
        except OSError:
            return [self.inner_pid]
        return _pids_where(lambda pid: os.readlink(f"/proc/{pid}/ns/pid") == target) or [self.inner_pid]

    def cpu_ns(self) -> int | None:
        return cpu_ns(self.inner_pid)

    def cpu_use(self) -> CpuUse:
        threads, ticks, main, others = 0, 0, 0, 0
        for pid in self.members():
            with suppress(OSError, ValueError, IndexError):
                tids = os.listdir(f"/proc/{pid}/task")
                threads += len(tids)
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
                for tid in tids:
                    ns = _thread_ns(pid, tid) or 0
                    if pid == self.inner_pid and tid == str(pid):
                        main += ns
                    else:
                        others += ns
        return CpuUse(threads=threads, seconds=ticks / _CLOCK_TICKS, main_ns=main, others_ns=others)

    def _signal_all(self, sig: int) -> None:
        if self.sandbox == "namespaces":
            for pid in self.members():
                with suppress(ProcessLookupError):
                    os.kill(pid, sig)
        else:
            with suppress(ProcessLookupError):
                os.killpg(self.pid, sig)

    def freeze(self) -> None:
        """Stop every process of the runner (nothing of the candidate's runs while the reference is timed)."""
        if not self.frozen:
            self._signal_all(signal.SIGSTOP)
            self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            self._signal_all(signal.SIGCONT)
            self.frozen = False

    def kill(self) -> None:
        # Killing the namespace's init kills everything inside it; the first child reaps it and exits by itself
        # (killing that one too would leave the runner a zombie of whoever adopts it).
        self._signal_all(signal.SIGKILL)
        if self.sandbox != "namespaces":
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def close(self, wait: bool = True) -> None:
        """Kill the runner before returning, so nothing of the candidate runs past it; `wait` False leaves waiting
        for its exit (a GPU context's teardown takes a while) to `reap`."""
        if self.closed:
            return
        self.closed = True
        if self.frozen:
            self.thaw()
        with suppress(Exception):
            self.send(protocol.Shutdown())
        self.kill()
        if wait:
            self.reap()

    def reap(self) -> None:
        """After `close`: wait for the killed runner's exit, then drop its channel, log and scratch folder."""
        self.wait_status()
        self.channel.close()
        self.log.join(1.0)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
