"""The fork server's way out when the `torch._dynamo` pre-import initialized CUDA (`forkserver._warm_torch_dynamo`):
it starts again in a fresh interpreter on the same judge socket, without the pre-import, and serves as before."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from workbench.eval.runner import sandbox
from workbench.eval.wire import forkserver_messages as m
from workbench.eval.wire.transport import Channel

ROOT = Path(__file__).resolve().parents[1]


def test_a_restarted_fork_server_says_hello_on_the_same_socket_without_the_pre_import():
    ours, theirs = Channel.pair()
    env = {**sandbox.runner_env("cpu"), "PYTHONPATH": str(ROOT)}
    code = ("import sys; from workbench.eval.runner import forkserver; "
            "forkserver._restart_without_dynamo()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                            env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    theirs.close()
    try:
        frame, _ = ours.recv(time.monotonic() + 120)
        hello = m.decode(frame, frozenset({"hello"}))
        assert isinstance(hello, m.Hello) and hello.pid == proc.pid  # exec keeps the process, and its socket
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert b"KWB_FORKSERVER_DYNAMO=0" in environ
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"workbench.eval.runner.forkserver" in cmdline
        ours.send(m.encode(m.Exit()))
        assert proc.wait(timeout=30) == 0
        assert b"starting again without it" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        ours.close()
