"""docs/anti-cheating.md, cheat 21: harm to the user. The runner sees an allow-listed environment, its own PID namespace, no
network, a read-only root without the user's files, a private scratch directory, and rlimits; its output is read
through a bounded buffer, and the whole sandbox dies with the evaluation. Each test plants a canary and checks that
the harm did not happen, not only the verdict."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import workbench as wb
from redteam.attacks import evaluate, kernel, needs_sandbox, processes_with

CANARY = "kwb-canary-7f3a9c"


def _leaked(res: wb.Result) -> bool:
    return CANARY in (res.log + res.message + repr(res.details) + repr(res.metadata))


@needs_sandbox
def test_secrets_in_the_environment_never_reach_the_runner(monkeypatch):
    for name in ("KAGGLE_KEY", "DATABASE_URL", "OPENAI_API_KEY", "MY_APP_SETTING", "WANDB_API_KEY"):
        monkeypatch.setenv(name, CANARY)
    from workbench.dispatch.pool import shutdown_workers

    shutdown_workers()  # the next judge starts with this environment
    attack = '''
import os
seen = [k for k, v in os.environ.items() if "kwb-canary" in v]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen += ["proc:" + pid for _ in [0] if b"kwb-canary" in open(f"/proc/{pid}/environ", "rb").read()]
        except OSError:
            pass
raise RuntimeError(f"SEEN {seen} {'kwb-canary' in repr(dict(os.environ))}")
'''
    res = evaluate(kernel(in_forward=attack))
    assert res.status == "runtime_error" and "SEEN [] False" in res.message, res.message
    assert not _leaked(res)


@needs_sandbox
def test_home_ssh_keys_and_dot_env_files_are_invisible(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(CANARY)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"SECRET={CANARY}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    attack = f'''
found = []
for path in [{str(home / ".ssh" / "id_rsa")!r}, {str(project / ".env")!r}, "/root/.ssh/id_rsa", ".env"]:
    try:
        found.append(open(path).read())
    except OSError:
        pass
raise RuntimeError(f"FOUND {{found}}")
'''
    res = evaluate(kernel(in_forward=attack))
    assert res.status == "runtime_error" and "FOUND []" in res.message, res.message
    assert not _leaked(res)


@needs_sandbox
def test_no_network_the_local_listener_receives_nothing():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    got: list[bytes] = []

    def accept() -> None:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                conn, _ = server.accept()
                got.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    attack = f'''
import socket
sent = False
for host in ("127.0.0.1", "10.0.2.2", "1.1.1.1"):
    try:
        s = socket.create_connection((host, {port}), timeout=1)
        s.sendall(b"{CANARY}")
        sent = True
    except OSError:
        pass
raise RuntimeError(f"SENT {{sent}}")
'''
    res = evaluate(kernel(in_forward=attack))
    thread.join(0.5)
    server.close()
    assert res.status == "runtime_error" and "SENT False" in res.message, res.message
    assert got == []


@needs_sandbox
def test_files_and_the_results_store_cannot_be_deleted_or_zeroed(tmp_path):
    keep = tmp_path / "precious.txt"
    keep.write_text(CANARY)
    store = wb.Store(tmp_path / "results.db")
    store.add(evaluate(kernel()))
    before = store.frame().shape[0]
    attack = f'''
import os, shutil
for path in [{str(keep)!r}, {str(tmp_path / "results.db")!r}]:
    try:
        with open(path, "r+b") as f:
            f.write(b"\\0" * 4096)
    except OSError:
        pass
    try:
        os.remove(path)
    except OSError:
        pass
shutil.rmtree({str(tmp_path)!r}, ignore_errors=True)
'''
    res = evaluate(kernel(in_forward=attack))
    assert res.status == "ok", res.message
    assert keep.read_text() == CANARY
    assert wb.Store(tmp_path / "results.db").frame().shape[0] == before


@needs_sandbox
def test_killing_the_caller_and_everything_visible_leaves_the_caller_alive():
    attack = '''
import os, signal
for pid in [os.getppid(), 1] + list(range(2, 50)):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
'''
    res = evaluate(kernel(in_forward=attack))
    # It sees only its own namespace, whose init ignores signals from inside: whatever it hit, it hit itself.
    assert res.status in ("ok", "crashed", "runtime_error"), res.message
    assert evaluate(kernel()).status == "ok"  # the judge is alive and the next candidate is judged


@needs_sandbox
def test_no_process_survives_the_evaluation():
    marker = f"sleep 4{os.getpid() % 1000}3"
    attack = f'''
import os
subprocess = __import__("sub" + "process")
subprocess.Popen(["sh", "-c", "{marker}"], start_new_session=True, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
_fork = getattr(os, "fo" + "rk")
if _fork() == 0:
    os.setsid()
    if _fork() == 0:
        os.execvp("sh", ["sh", "-c", "{marker}"])
    os._exit(0)
'''
    res = evaluate(kernel(at_import=attack))
    assert res.status == "ok", res.message
    time.sleep(0.5)
    assert processes_with(marker) == []


def test_a_flood_of_output_costs_the_caller_a_bounded_amount(tmp_path):
    attack = '''
import os, sys
chunk = b"x" * (1 << 20)
for _ in range(300):
    os.write(1, chunk)
    os.write(2, chunk)
raise RuntimeError("after the flood")
'''
    res = evaluate(kernel(in_forward=attack))
    assert res.status == "runtime_error" and "after the flood" in res.message
    assert len(res.log) < 100_000 and len(res.message) < 20_000
    store = wb.Store(tmp_path / "flood.db")
    store.add(res)
    assert (tmp_path / "flood.db").stat().st_size < 2_000_000


@needs_sandbox
def test_filling_the_disk_stops_at_the_scratch_cap():
    free_before = os.statvfs("/").f_bavail
    attack = '''
import os
written = 0
with open("/tmp/fill", "wb") as f:
    while written < (8 << 30):
        f.write(b"\\0" * (64 << 20))
        written += 64 << 20
'''
    res = evaluate(kernel(at_import=attack), timeout=120)
    # The scratch tmpfs is full (ENOSPC) or the file-size limit hit (SIGXFSZ): the candidate never loads.
    assert res.status in ("compile_error", "crashed"), res.message
    assert "No space left" in res.message or "SIGXFSZ" in res.message or "File too large" in res.message
    free_after = os.statvfs("/").f_bavail
    assert abs(free_after - free_before) * os.statvfs("/").f_frsize < (1 << 30)
    assert not Path("/tmp/fill").exists()
