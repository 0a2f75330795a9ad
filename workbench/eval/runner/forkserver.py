"""The fork server: a process that has imported torch, triton and the runner (CUDA untouched) and forks one fresh,
sandboxed runner per candidate, so a runner starts in milliseconds instead of re-importing torch.

It is trusted code started by the judge with an allow-listed environment (so a runner's /proc/self/environ holds
no secrets either) and it never runs candidate code or touches CUDA: CUDA cannot be used in a child forked from a
process that initialised it. Requests come from the judge on a socket:

    {"op": "spawn", "job", "nonce", "device", "limits", "share_ipc", "extra_binds", "writable_binds"} + descriptors [runner socket,
        log pipe]            -> {"pid": outer pid to kill, "inner_pid": the runner, "sandbox": kind, "reason": why}
    {"op": "wait", "pid"}    -> {"status": wait status}     (after the runner's channel closed)

A spawned runner is a session leader whose death signal is tied to its parent; with namespaces it is PID 1 of
its own PID namespace, so killing it kills everything it started.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import time
from typing import Any

from workbench.eval.runner import sandbox
from workbench.eval.wire.transport import Channel, ChannelClosed

#: Descriptor numbers the runner gets: its protocol socket, and stdout/stderr on the log pipe.
RUNNER_SOCKET_FD = 3


def _close_all_but(keep: set[int]) -> None:
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _redirect_io(log_fd: int, sock_fd: int) -> None:
    """stdin from /dev/null, stdout and stderr to the log pipe, the protocol socket at RUNNER_SOCKET_FD."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    if sock_fd != RUNNER_SOCKET_FD:
        os.dup2(sock_fd, RUNNER_SOCKET_FD)
    os.set_inheritable(RUNNER_SOCKET_FD, True)


def _serve_runner(req: dict[str, Any], kind: str, reason: str) -> None:
    from workbench.eval.runner.main import serve

    faulthandler.enable()
    try:
        serve(RUNNER_SOCKET_FD, req["job"], req["nonce"], req["device"], kind, reason)
    except BaseException as exc:  # noqa: BLE001 - the runner's own failure, said as such (not the sandbox's)
        try:
            os.write(2, f"kwb runner failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        os._exit(1)


def _writable(req: dict[str, Any], inside: str) -> str | None:
    """Without a sandbox: the host path of the writable bind that would be mounted at `inside`."""
    return next((src for src, dst in req.get("writable_binds", []) if dst == inside), None)


def _limits(req: dict[str, Any]) -> sandbox.Limits:
    return sandbox.Limits(**req.get("limits", {}))


def _child(req: dict[str, Any], sock_fd: int, log_fd: int, kind: str, reason: str, plan: sandbox.Plan | None,
           sync_w: int, go_r: int) -> None:
    """First child: sandbox itself (namespaces: then fork the runner as PID 1 and wait for it), never return."""
    code = 0
    try:
        fork_server = os.getppid()
        os.setsid()
        sandbox.die_with_parent(expected_parent=fork_server)
        _redirect_io(log_fd, sock_fd)
        outer_uid, baseline = sandbox.outer_process_baseline()
        if kind != "namespaces":
            _close_all_but({0, 1, 2, RUNNER_SOCKET_FD})
            sandbox.apply_limits(_limits(req), outer_uid, baseline)
            sandbox.set_environment({**sandbox.runner_env(req["device"]), "HOME": req["workdir"],
                                     "TMPDIR": req["workdir"], "KWB_WORKDIR": req["workdir"],
                                     "TRITON_CACHE_DIR": _writable(req, "/tmp/triton") or req["workdir"] + "/triton",
                                     "TORCH_EXTENSIONS_DIR": req["workdir"] + "/torch_extensions"})
            _serve_runner(req, kind, reason)
            os._exit(0)
        # A root caller stages the sources with root's rights first (the sandbox's root will be nobody).
        staged = sandbox.stage_sources(plan) if os.geteuid() == 0 else {}
        sandbox.unshare_namespaces(plan.share_ipc)
        os.write(sync_w, b"u")
        if os.read(go_r, 1) != b"g":
            os._exit(71)
        # Become the namespace's root (the outer user the maps name): until then this process still has the
        # caller's IDs, which the new namespace does not map.
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        # Changing IDs clears the parent-death signal: set it again, or this process (and the runner, which dies
        # with it) would outlive a killed fork server.
        sandbox.die_with_parent(expected_parent=fork_server)
        sandbox.build_root(plan, staged)
        runner = os.fork()
        if runner == 0:
            sandbox.die_with_parent()
            os.close(sync_w)
            os.close(go_r)
            sandbox.enter_root(plan)
            sandbox.drop_privileges()
            sandbox.apply_limits(plan.limits, outer_uid, baseline)
            sandbox.set_environment({**plan.env, "KWB_WORKDIR": "/tmp/work"})
            _close_all_but({0, 1, 2, RUNNER_SOCKET_FD})
            _serve_runner(req, kind, reason)
            os._exit(0)
        os.write(sync_w, str(runner).encode() + b"\n")
        _close_all_but({2})
        _, status = os.waitpid(runner, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    except BaseException as exc:  # noqa: BLE001 - reported on stderr (the runner's log), then exit
        try:
            os.write(2, f"kwb sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 70
    os._exit(code)


def spawn(req: dict[str, Any], fds: list[int], kind: str, reason: str) -> dict[str, Any]:
    sock_fd, log_fd = fds
    plan = None
    if kind == "namespaces":
        plan = sandbox.plan(req["device"], _limits(req), bool(req.get("share_ipc")),
                            [tuple(b) for b in req.get("extra_binds", [])],
                            [tuple(b) for b in req.get("writable_binds", [])])
    sync_r, sync_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(sync_r)
        os.close(go_w)
        _child(req, sock_fd, log_fd, kind, reason, plan, sync_w, go_r)
    os.close(sync_w)
    os.close(go_r)
    for fd in (sock_fd, log_fd):
        os.close(fd)
    inner = pid
    try:
        if kind == "namespaces":
            if os.read(sync_r, 1) == b"u":
                sandbox.write_id_maps(pid)
                os.write(go_w, b"g")
                text = b""
                while not text.endswith(b"\n"):
                    chunk = os.read(sync_r, 32)
                    if not chunk:
                        break
                    text += chunk
                inner = int(text) if text.strip() else pid
    except (OSError, ValueError) as exc:
        os.kill(pid, signal.SIGKILL)
        return {"pid": pid, "inner_pid": pid, "sandbox": kind, "reason": f"sandbox setup failed: {exc}"}
    finally:
        os.close(sync_r)
        os.close(go_w)
    return {"pid": pid, "inner_pid": inner, "sandbox": kind, "reason": reason}


def _reap(reaped: dict[int, int]) -> None:
    """Collect runners that already ended (their status is kept for a later "wait"), so none stays a zombie."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reaped[pid] = status


def main() -> None:
    sandbox.die_with_parent()  # the judge that owns this server; its runners die with the server in turn
    channel = Channel(socket.socket(fileno=int(sys.argv[1])))
    # Imports a runner needs, done once here so every fork starts with them. No CUDA call may happen here.
    import gc

    import torch  # noqa: F401
    import triton  # noqa: F401

    import workbench.eval.runner.main  # noqa: F401
    from workbench.eval.runner import loading  # noqa: F401

    gc.freeze()  # what every runner inherits stays out of its collector's passes
    probe = sandbox.probe()
    channel.send({"ready": True, "sandbox": probe.kind, "reason": probe.reason, "pid": os.getpid()})
    reaped: dict[int, int] = {}
    while True:
        try:
            req, fds = channel.recv()
        except ChannelClosed:
            return
        op = req.get("op")
        _reap(reaped)
        if op == "spawn":
            channel.send(spawn(req, fds, probe.kind, probe.reason))
        elif op == "wait":
            pid = int(req["pid"])
            deadline = time.monotonic() + 10  # never block the server on a child that will not die
            while pid not in reaped and time.monotonic() < deadline:
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done, status = pid, -1
                if done:
                    reaped[pid] = status
                else:
                    time.sleep(0.005)
            channel.send({"status": reaped.pop(pid, -1)})
        elif op == "exit":
            return
        else:
            channel.send({"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    main()
