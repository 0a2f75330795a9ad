"""Issue 22 item 5: the runner's syscall filter. Inside its namespaces a runner could make a nested user namespace
(every capability inside it, and with them nftables and mounts), set up io_uring, load BPF, trace its own
children. A candidate tries each through raw syscalls (numbers written out here, not taken from the filter) and
reports the errno; the honest things a runner does (threads, subprocesses, fork, Unix sockets) must still work."""

from __future__ import annotations

import errno
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from redteam.attacks import evaluate, kernel, needs_sandbox
from workbench.sandbox import landlock, syscall_filter

# Imports by assembled names: the static scan would otherwise reject the candidate before it runs.
ATTEMPTS = r'''
import json, os, platform
ctypes, subprocess, threading, socket = (__import__(n) for n in ("ct" + "ypes", "sub" + "process", "thre" + "ading",
                                                                 "sock" + "et"))
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_X86 = platform.machine() == "x86_64"
_NR = dict(clone=56 if _X86 else 220, clone3=435, setns=308 if _X86 else 268, io_uring_setup=425,
           bpf=321 if _X86 else 280, ptrace=101 if _X86 else 117, userfaultfd=323 if _X86 else 282,
           keyctl=250 if _X86 else 219, perf_event_open=298 if _X86 else 241, fsopen=430, open_tree=428,
           process_vm_readv=310 if _X86 else 270, finit_module=313 if _X86 else 273)
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x40000000, 0x20000, 17
seen = {}

def _note(name, ret):
    err = ctypes.get_errno()
    seen[name] = "ok" if ret >= 0 else errno_name(err)

def errno_name(err):
    import errno
    return errno.errorcode.get(err, str(err))

def _forked(name, ret):
    if ret == 0:          # a child made by a raw clone: leave at once
        os._exit(0)
    if ret > 0:
        os.waitpid(ret, 0)
    _note(name, ret)

_note("unshare(NEWUSER)", _libc.unshare(CLONE_NEWUSER))
_note("unshare(NEWNET)", _libc.unshare(CLONE_NEWNET))
_forked("clone(NEWUSER)", _libc.syscall(_NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
_args = (ctypes.c_uint64 * 11)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)
_forked("clone3(NEWUSER)", _libc.syscall(_NR["clone3"], ctypes.byref(_args), ctypes.sizeof(_args)))
_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
_note("setns", _libc.syscall(_NR["setns"], _fd, 0))
_note("mount(tmpfs)", _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None))
_note("fsopen", _libc.syscall(_NR["fsopen"], b"tmpfs", 0))
_note("open_tree", _libc.syscall(_NR["open_tree"], -100, b"/tmp", 1))
_params = ctypes.create_string_buffer(120)
_note("io_uring_setup", _libc.syscall(_NR["io_uring_setup"], 4, _params))
_attr = (ctypes.c_uint32 * 30)(2, 4, 4, 1)  # BPF_MAP_TYPE_ARRAY, key 4, value 4, 1 entry
_note("bpf", _libc.syscall(_NR["bpf"], 0, ctypes.byref(_attr), ctypes.sizeof(_attr)))
_child = subprocess.Popen(["sleep", "30"])
_note("ptrace(ATTACH)", _libc.syscall(_NR["ptrace"], 16, _child.pid, 0, 0))
_child.kill(); _child.wait()
_note("userfaultfd", _libc.syscall(_NR["userfaultfd"], 0))
_note("keyctl", _libc.syscall(_NR["keyctl"], 0, -3, 0))
_perf = (ctypes.c_uint64 * 16)(1 | (128 << 32), 0)  # PERF_TYPE_SOFTWARE, size 128, config 0 (cpu clock)
_note("perf_event_open", _libc.syscall(_NR["perf_event_open"], ctypes.byref(_perf), 0, -1, -1, 0))
_buf = ctypes.create_string_buffer(8)
_iov = (ctypes.c_uint64 * 2)(ctypes.addressof(_buf), 8)
_note("process_vm_readv", _libc.syscall(_NR["process_vm_readv"], os.getpid(), ctypes.byref(_iov), 1,
                                         ctypes.byref(_iov), 1, 0))
_note("finit_module", _libc.syscall(_NR["finit_module"], _fd, b"", 0))
# What a runner does honestly: all of it must still work.
_t = threading.Thread(target=lambda: seen.__setitem__("thread", "ok")); _t.start(); _t.join()
seen["subprocess"] = "ok" if subprocess.run(["true"]).returncode == 0 else "failed"
_pid = getattr(os, "fo" + "rk")()
if _pid == 0:
    os._exit(0)
seen["fork"] = "ok" if os.waitpid(_pid, 0)[1] == 0 else "failed"
_a, _b = socket.socketpair(); _a.sendall(b"x"); seen["unix socket"] = "ok" if _b.recv(1) == b"x" else "failed"
'''
HONEST = ("thread", "subprocess", "fork", "unix socket")


def _outcomes(res) -> dict[str, str]:
    found = re.search(r"SEEN (\{.*?\})", res.message)
    assert found, res.message
    return json.loads(found.group(1))


@needs_sandbox
def test_namespaces_mounts_io_uring_bpf_and_ptrace_are_refused_inside_the_runner():
    res = evaluate(kernel(at_import=ATTEMPTS, in_forward='raise RuntimeError("SEEN " + json.dumps(seen))'))
    assert res.sandbox == "namespaces+seccomp", (res.sandbox, res.protocol.get("sandbox_reason"))
    seen = _outcomes(res)
    refused = {name: out for name, out in seen.items() if name not in HONEST}
    assert len(refused) == 16, refused
    assert all(out in ("EPERM", "ENOSYS") for out in refused.values()), refused
    assert seen["clone3(NEWUSER)"] == "ENOSYS"  # so the C library falls back to clone, whose flags are checked
    assert {name: seen[name] for name in HONEST} == dict.fromkeys(HONEST, "ok")


@needs_sandbox
def test_the_honest_kernel_passes_under_the_filter_with_threads_and_subprocesses_at_import():
    control = 'subprocess = __import__("sub" + "process")\nthreading = __import__("thre" + "ading")\n' \
              'subprocess.run(["true"], check=True)\n' \
              't = threading.Thread(target=sum, args=([1, 2],))\nt.start()\nt.join()\n'
    res = evaluate(kernel(at_import=control))
    assert res.status == "ok" and res.sandbox == "namespaces+seccomp", res.message


@pytest.mark.parametrize("machine", sorted(syscall_filter.AUDIT_ARCH))
def test_the_filter_program_decides_like_the_deny_list_on_each_machine(machine):
    """The BPF program run instruction by instruction (as the kernel does) for both machines, so the aarch64 table
    is checked on an x86 CI machine too."""
    prog = syscall_filter.program(machine, deny_sockets=True)
    col = 0 if machine == "x86_64" else 1
    arch = syscall_filter.AUDIT_ARCH[machine]
    eperm, enosys = syscall_filter.ret_errno(errno.EPERM), syscall_filter.ret_errno(errno.ENOSYS)
    run = syscall_filter.evaluate
    for name, numbers in syscall_filter.DENIED.items():
        assert run(prog, numbers[col], arch) == eperm, name
    clone, clone3, sock = (syscall_filter.SPECIAL[n][col] for n in ("clone", "clone3", "socket"))
    thread_flags = 0x3D0F00  # CLONE_VM | FS | FILES | SIGHAND | THREAD | SYSVSEM | SETTLS | PARENT/CHILD_SETTID
    assert run(prog, clone, arch, thread_flags) == syscall_filter.RET_ALLOW
    assert run(prog, clone, arch, 17) == syscall_filter.RET_ALLOW  # fork
    for flag in (0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x02000000, 0x04000000, 0x08000000):
        assert run(prog, clone, arch, flag | 17) == eperm, hex(flag)
    assert run(prog, clone3, arch) == enosys
    assert run(prog, sock, arch, 1) == syscall_filter.RET_ALLOW  # AF_UNIX
    for family in (2, 10, 16, 17):  # AF_INET, AF_INET6, AF_NETLINK, AF_PACKET
        assert run(prog, sock, arch, family) == syscall_filter.ret_errno(errno.EAFNOSUPPORT)
    assert run(prog, 0, arch) == syscall_filter.RET_ALLOW and run(prog, 9 if col == 0 else 222, arch) == \
        syscall_filter.RET_ALLOW  # read, mmap
    other = 0x40000003 if machine == "x86_64" else 0x40000028  # i386 on x86_64, 32-bit ARM on aarch64
    assert run(prog, 1, other) == enosys  # another ABI: nothing gets through it
    if machine == "x86_64":
        assert run(prog, 0x40000000 | 272, arch) == enosys  # x32 unshare
    plain = syscall_filter.program(machine)
    assert run(plain, sock, arch, 2) == syscall_filter.RET_ALLOW  # the namespaces tier keeps sockets


def _confine_in_a_child(call: str, machine: str | None = None) -> list[str]:
    """Run one confinement step in a throwaway interpreter (it confines that process for good) and return its
    (tier, note); `machine` pretends the interpreter runs on another machine."""
    pretend = f"platform.machine = lambda: {machine!r}\n" if machine else ""
    code = (f"import json, platform, tempfile\n{pretend}"
            "from workbench.sandbox import confinement\n"
            f"print(json.dumps({call}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_filter_that_cannot_be_installed_is_named_in_the_tier_not_skipped_silently():
    assert _confine_in_a_child("confinement.in_namespaces()", machine="riscv64") == \
        ["namespaces", "no syscall filter: no syscall table for riscv64"]
    if sys.platform == "linux" and platform.machine() in syscall_filter.AUDIT_ARCH:
        assert _confine_in_a_child("confinement.in_namespaces()") == ["namespaces+seccomp", ""]
    tier, note = _confine_in_a_child("confinement.without_namespaces([tempfile.mkdtemp()], 'cpu')",
                                     machine="riscv64")
    assert "no syscall filter: no syscall table for riscv64" in note
    assert tier == ("landlock" if landlock.abi() >= 1 else "none")


@pytest.mark.gpu
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "fallback"])
def test_triton_and_cuda_builds_work_under_the_filter_on_a_gpu(namespaces, monkeypatch):
    """Triton (ptxas, its launcher built with gcc), a CUDA load_inline build (nvcc, ninja), CUDA IPC, events and
    the profiler all run under the filter, in both tiers; the attempts above are refused there too."""
    import workbench as wb
    from redteam.attacks import softmax_task
    from redteam.test_build_cache_links import CUDA_SOFTMAX
    from workbench.dispatch.pool import shutdown_workers
    from workbench.sandbox import namespaces as sandbox

    if namespaces and sandbox.probe().kind != "namespaces":
        pytest.skip("no namespaces here")
    if not namespaces:
        monkeypatch.setenv("KWB_SANDBOX", "none")
    shutdown_workers()
    # Without namespaces a GPU runner keeps only the syscall filter (confinement.without_namespaces).
    expected = "namespaces+seccomp" if namespaces else "seccomp"
    try:
        triton = wb.evaluate(softmax_task(), kernel(), device="cuda")
        assert triton.status == "ok" and triton.sandbox == expected, (triton.message, triton.sandbox)
        assert triton.speedup is not None and triton.coverage is not None, triton.summary()
        cuda = wb.evaluate(softmax_task(), wb.Candidate(source=CUDA_SOFTMAX, language="cuda"), device="cuda",
                           timeout=600, time_it=False)
        assert cuda.status == "ok" and cuda.sandbox == expected, cuda.message
        res = wb.evaluate(softmax_task(), kernel(at_import=ATTEMPTS,
                                                 in_forward='raise RuntimeError("SEEN " + json.dumps(seen))'),
                          device="cuda", time_it=False)
        seen = _outcomes(res)
        assert all(out in ("EPERM", "ENOSYS") for name, out in seen.items() if name not in HONEST), seen
        assert {name: seen[name] for name in HONEST} == dict.fromkeys(HONEST, "ok")
    finally:
        shutdown_workers()
