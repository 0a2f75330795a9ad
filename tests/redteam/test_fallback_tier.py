"""Issue 22 item 5, second half: where namespaces cannot be made (`KWB_SANDBOX=none` here), the runner still
confines itself with Landlock and a socket filter. A candidate tries to write next to the user's files, into /tmp
outside its scratch, into the results store's folder; to open IPv4, IPv6, netlink and packet sockets and reach a
local listener; to kill a process of the user's. Each attempt is checked on the host, not only by the verdict;
writes into its own scratch and build directories (what an honest runner needs) still work."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from redteam.attacks import evaluate, kernel
from workbench.dispatch.pool import shutdown_workers
from workbench.sandbox import landlock

CANARY = "kwb-fallback-canary-41c7"
needs_landlock = pytest.mark.skipif(landlock.abi() < 1, reason="Landlock is not available in this kernel")


@pytest.fixture(scope="module")
def no_namespaces():
    """KWB_SANDBOX=none for this module: one judge started with it (and its fork server) serves both tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KWB_SANDBOX", "none")
        shutdown_workers()  # the next judge and its fork server see the setting
        yield
        shutdown_workers()


def _listener() -> tuple[socket.socket, list[bytes], threading.Thread]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    got: list[bytes] = []

    def accept() -> None:
        deadline = time.time() + 30
        while time.time() < deadline and server.fileno() >= 0:
            try:
                conn, _ = server.accept()
                got.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return server, got, thread


def _attack(targets: list[str], port: int, victim: int) -> str:
    return f'''
import json, os, signal
socket = __import__("sock" + "et")
seen = {{}}
for i, path in enumerate({targets!r}):
    try:
        with open(path, "w") as f:
            f.write("{CANARY}")
        seen["write " + str(i)] = "ok"
    except OSError as exc:
        seen["write " + str(i)] = exc.__class__.__name__
for name, family, kind in (("inet", 2, 1), ("inet6", 10, 1), ("netlink", 16, 3), ("packet", 17, 3),
                           ("udp", 2, 2)):
    try:
        socket.socket(family, kind).close()
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = exc.__class__.__name__ + str(exc.errno)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"{CANARY}")
    seen["connect"] = "ok"
except OSError as exc:
    seen["connect"] = exc.__class__.__name__
try:
    os.kill({victim}, signal.SIGKILL)
    seen["kill"] = "ok"
except OSError as exc:
    seen["kill"] = exc.__class__.__name__
for name, folder in (("scratch", os.environ["KWB_WORKDIR"]), ("triton", os.environ["TRITON_CACHE_DIR"]),
                     ("builds", os.environ["TORCH_EXTENSIONS_DIR"])):
    with open(os.path.join(folder, "honest.txt"), "w") as f:
        f.write("x")
    os.makedirs(os.path.join(folder, "sub", "dir"), exist_ok=True)
    os.rename(os.path.join(folder, "honest.txt"), os.path.join(folder, "sub", "moved.txt"))
    seen[name] = "ok"
'''


@needs_landlock
def test_without_namespaces_writes_sockets_and_signals_stay_inside(no_namespaces, tmp_path):
    home_file = tmp_path / "notebook.ipynb"
    home_file.write_text("mine")
    targets = [str(tmp_path / "planted.txt"), str(home_file), f"/tmp/kwb-escape-{os.getpid()}.txt",
               str(tmp_path / "results.db")]
    victim = subprocess.Popen(["sleep", "60"])
    server, got, thread = _listener()
    try:
        res = evaluate(kernel(at_import=_attack(targets, server.getsockname()[1], victim.pid),
                              in_forward='raise RuntimeError("SEEN " + json.dumps(seen))'))
        time.sleep(0.3)
        victim_alive = victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
        server.close()
        thread.join(1)
    found = re.search(r"SEEN (\{.*?\})", res.message)
    assert found, res.message
    seen = json.loads(found.group(1))
    assert res.sandbox == "landlock+seccomp", (res.sandbox, res.protocol.get("sandbox_reason"))
    assert {k: v for k, v in seen.items() if k.startswith("write")} == \
        dict.fromkeys(("write 0", "write 1", "write 2", "write 3"), "PermissionError")
    assert not (tmp_path / "planted.txt").exists() and home_file.read_text() == "mine"
    assert not os.path.exists(targets[2]) and not os.path.exists(targets[3])
    for name in ("inet", "inet6", "netlink", "packet", "udp"):
        assert seen[name] == f"OSError{errno.EAFNOSUPPORT}", (name, seen[name])
    assert seen["connect"] != "ok" and got == []
    assert seen["scratch"] == seen["triton"] == seen["builds"] == "ok"
    if landlock.abi() >= 6:  # signals scoped to the runner's own domain
        assert seen["kill"] == "PermissionError" and victim_alive


@needs_landlock
def test_the_honest_kernel_passes_under_the_fallback_tier(no_namespaces):
    res = evaluate(kernel())
    assert res.status == "ok" and res.sandbox == "landlock+seccomp", res.message
    assert "sandbox=landlock+seccomp" in res.summary()
    assert "mismatch" in evaluate(kernel(in_forward="y = y * 0.5")).flags
