"""The fork server: a trusted process with torch, triton and the runner imported (CUDA untouched) that forks one
sandboxed runner per candidate in milliseconds. A runner dies with its parent; with namespaces it is PID 1 of its own
PID namespace, and its first child ends the way it ended, so the judge's wait status says what happened."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import socket
import sys
import time

from workbench.eval.wire import forkserver_messages as messages
from workbench.eval.wire.forkserver_messages import Spawn
from workbench.eval.wire.process_env import runner_env
from workbench.eval.wire.transport import Channel, ChannelClosed, FrameError
from workbench.sandbox import confinement, new_root
from workbench.sandbox import namespaces as sandbox

#: Descriptor numbers the runner gets: its protocol socket, and stdout/stderr on the log pipe.
RUNNER_SOCKET_FD = 3
#: Exit code of a runner whose sandbox could not be built (the reason is on its log).
SETUP_FAILED = 70


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _redirect_io(log_fd: int, sock_fd: int) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    if sock_fd != RUNNER_SOCKET_FD:
        os.dup2(sock_fd, RUNNER_SOCKET_FD)
    os.set_inheritable(RUNNER_SOCKET_FD, True)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode()[:2000] + b"\n")


def _setup_failed(exc: BaseException) -> None:
    _say(f"kwb sandbox setup failed: {type(exc).__name__}: {exc}")
    os._exit(SETUP_FAILED)


def _serve_runner(req: Spawn, tier: str, note: str) -> None:
    from workbench.eval.runner.main import serve

    faulthandler.enable()
    try:
        serve(RUNNER_SOCKET_FD, req.job, req.nonce, req.device, tier, note, req.warm)
    except BaseException as exc:  # noqa: BLE001 - the runner's own failure, said as such (not the sandbox's)
        _say(f"kwb runner failed: {type(exc).__name__}: {exc}")
        os._exit(1)
    os._exit(0)


def _limits(req: Spawn) -> sandbox.Limits:
    return sandbox.Limits(address_space=req.address_space, cpu_seconds=req.cpu_seconds,
                          scratch_bytes=req.scratch_bytes)


def _run_without_namespaces(req: Spawn, reason: str, outer_uid: int, baseline: int) -> None:
    """The runner in this very process (no namespaces); never returns."""
    try:
        _close_all_but({0, 1, 2, RUNNER_SOCKET_FD})
        sandbox.apply_limits(_limits(req), outer_uid, baseline)
        triton = next((src for src, dst in req.writable_binds if dst == "/tmp/triton"), None)
        triton = triton or os.path.join(req.workdir, "triton")
        builds = os.path.join(req.workdir, "torch_extensions")
        for path in (triton, builds):
            os.makedirs(path, exist_ok=True)
        sandbox.set_environment({**runner_env(req.device), "HOME": req.workdir, "TMPDIR": req.workdir,
                                 "KWB_WORKDIR": req.workdir, "TRITON_CACHE_DIR": triton,
                                 "TORCH_EXTENSIONS_DIR": builds})
        tier, note = confinement.without_namespaces([req.workdir, triton], req.device)
    except BaseException as exc:  # noqa: BLE001 - reported on the runner's log
        _setup_failed(exc)
    _serve_runner(req, tier, "; ".join(p for p in (reason, note) if p))


def _runner_in_namespaces(plan: sandbox.Plan, outer_uid: int, baseline: int, req: Spawn) -> None:
    """The runner, PID 1 of its PID namespace: enter the new root, drop privileges, install the filter, serve."""
    try:
        sandbox.die_with_parent()
        new_root.enter_root(plan)
        sandbox.drop_privileges()
        sandbox.apply_limits(plan.limits, outer_uid, baseline)
        sandbox.set_environment({**plan.env, "KWB_WORKDIR": "/tmp/work"})
        _close_all_but({0, 1, 2, RUNNER_SOCKET_FD})
        tier, note = confinement.in_namespaces()
    except BaseException as exc:  # noqa: BLE001 - reported on the runner's log
        _setup_failed(exc)
    _serve_runner(req, tier, note)


def _enter_namespaces(req: Spawn, plan: sandbox.Plan, sync_w: int, go_r: int, fork_server: int,
                      outer_uid: int, baseline: int) -> int:
    """In the first child: make the namespaces, build the new root, fork the runner into it; the runner's PID."""
    staged = new_root.stage_sources(plan) if os.geteuid() == 0 else {}
    sandbox.unshare_namespaces(plan.share_ipc)
    os.write(sync_w, b"u")
    if os.read(go_r, 1) != b"g":
        os._exit(71)
    # Become the namespace's root: the caller's IDs are not mapped in the new namespace.
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    # Changing IDs clears the parent-death signal: set it again, or the runner would outlive a killed fork server.
    sandbox.die_with_parent(expected_parent=fork_server)
    new_root.build_root(plan, staged)
    runner = os.fork()
    if runner == 0:
        os.close(sync_w)
        os.close(go_r)
        _runner_in_namespaces(plan, outer_uid, baseline, req)
    os.write(sync_w, str(runner).encode() + b"\n")
    return runner


def exit_like(status: int) -> None:
    """End this process the way a child with wait status `status` ended (the same signal or exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is to be ignored: say which by the code
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _child(req: Spawn, sock_fd: int, log_fd: int, kind: str, reason: str, plan: sandbox.Plan | None,
           sync_w: int, go_r: int) -> None:
    """First child: sandbox itself (with namespaces, fork the runner as PID 1 and wait for it); never returns."""
    try:
        fork_server = os.getppid()
        os.setsid()
        sandbox.die_with_parent(expected_parent=fork_server)
        _redirect_io(log_fd, sock_fd)
        outer_uid, baseline = sandbox.outer_process_baseline()
        if kind != "namespaces" or plan is None:
            _run_without_namespaces(req, reason, outer_uid, baseline)
        runner = _enter_namespaces(req, plan, sync_w, go_r, fork_server, outer_uid, baseline)
        _close_all_but({2})
    except BaseException as exc:  # noqa: BLE001 - reported on stderr (the runner's log), then exit
        _setup_failed(exc)
    # The sandbox exists: whatever ends the runner now is passed on as it is.
    while True:
        try:
            _, status = os.waitpid(runner, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    exit_like(status)


def spawn(req: Spawn, fds: list[int], kind: str, reason: str) -> messages.Message:
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return messages.Refused(f"spawn needs 2 descriptors (runner socket, log pipe), got {len(fds)}")
    sock_fd, log_fd = fds
    plan = sandbox.plan(req.device, _limits(req), runner_env(req.device), req.share_ipc, list(req.extra_binds),
                        list(req.writable_binds)) if kind == "namespaces" else None
    sync_r, sync_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(sync_r)
        os.close(go_w)
        _child(req, sock_fd, log_fd, kind, reason, plan, sync_w, go_r)
    for fd in (sync_w, go_r, sock_fd, log_fd):
        os.close(fd)
    inner = pid
    try:
        if kind == "namespaces" and os.read(sync_r, 1) == b"u":
            sandbox.write_id_maps(pid)
            os.write(go_w, b"g")
            text = b""
            while not text.endswith(b"\n") and (chunk := os.read(sync_r, 32)):
                text += chunk
            inner = int(text) if text.strip() else pid
    except (OSError, ValueError) as exc:
        os.kill(pid, signal.SIGKILL)
        return messages.Spawned(pid=pid, inner_pid=pid, sandbox=kind, reason=f"sandbox setup failed: {exc}")
    finally:
        os.close(sync_r)
        os.close(go_w)
    return messages.Spawned(pid=pid, inner_pid=inner, sandbox=kind, reason=reason)


def _reap(reaped: dict[int, int]) -> None:
    """Collect runners that ended (their status kept for a later Wait), so none stays a zombie."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reaped[pid] = status


def wait_for(pid: int, reaped: dict[int, int], limit: float = 10.0) -> int:
    """The wait status of runner `pid`, never blocking the server longer than `limit` (-1 if it will not die)."""
    deadline = time.monotonic() + limit
    while pid not in reaped and time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, -1
        if done:
            reaped[pid] = status
        else:
            time.sleep(0.005)
    return reaped.pop(pid, -1)


def serve_requests(channel: Channel, kind: str, reason: str) -> None:
    reaped: dict[int, int] = {}
    while True:
        fds: list[int] = []
        try:
            frame, fds = channel.recv()
            msg = messages.decode(frame, messages.JUDGE_KINDS)
        except ChannelClosed:
            return
        except (FrameError, messages.ProtocolError) as exc:
            for fd in fds:
                os.close(fd)
            channel.send(messages.encode(messages.Refused(str(exc)[:500])))
            continue
        _reap(reaped)
        if isinstance(msg, Spawn):
            channel.send(messages.encode(spawn(msg, fds, kind, reason)))
            continue
        for fd in fds:
            os.close(fd)
        if isinstance(msg, messages.Wait):
            channel.send(messages.encode(messages.Status(pid=msg.pid, status=wait_for(msg.pid, reaped))))
        elif isinstance(msg, messages.Exit):
            return


def _warm_triton_key() -> None:
    """Compute Triton's cache key (a hash of its sources and libtriton) once here for every runner (no CUDA call)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return
    for where in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            module = __import__(where, fromlist=["triton_key"])
            module.triton_key()
            return
        except Exception:  # noqa: BLE001 - an optimization: any Triton version without it starts as before
            continue


def _warm_interpreter() -> None:
    """CPU runners only: one tiny kernel through Triton's interpreter, whose first launch in a process sets it up."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def _scaled_exp(x_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.arange(0, BLOCK)
            mask = offsets < n
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
            tl.store(x_ptr + offsets, tl.exp(x - tl.max(x, axis=0)) / tl.sum(x, axis=0), mask=mask)

        _scaled_exp[(1,)](torch.ones(8), 8, BLOCK=8)
    except Exception:  # noqa: BLE001 - an optimization: the first candidate launch sets the interpreter up instead
        pass


def main() -> None:
    sandbox.die_with_parent()  # the judge that owns this server; its runners die with the server in turn
    channel = Channel(socket.socket(fileno=int(sys.argv[1])))
    # Imports every runner needs, once; no CUDA call may happen here.
    import gc

    import torch  # noqa: F401
    import triton  # noqa: F401

    import workbench.eval.runner.main  # noqa: F401
    from workbench.eval.runner import loading  # noqa: F401

    _warm_triton_key()
    _warm_interpreter()
    gc.freeze()  # what every runner inherits stays out of its collector's passes
    probe = sandbox.probe()
    channel.send(messages.encode(messages.Hello(sandbox=probe.kind, reason=probe.reason, pid=os.getpid())))
    serve_requests(channel, probe.kind, probe.reason)


if __name__ == "__main__":
    main()
