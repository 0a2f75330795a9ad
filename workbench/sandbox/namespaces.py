"""The runner's sandbox (docs/trust-boundary.md): user, mount, PID, network, UTS and IPC namespaces made by the forked
child, a new root from an allow-list (`new_root.py`), then no capabilities, no_new_privs, rlimits and the syscall
filter; a root caller's sandbox maps to `nobody`. Where namespaces cannot be made, `probe()` says why and the runner
confines itself (`confinement.py`)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import resource
import signal
import sys
from dataclasses import dataclass, field

# ---- kernel constants (x86_64 and aarch64 share the flag values; syscall numbers differ) --------------------------
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP = 1, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "mount_setattr": 442},
             "aarch64": {"pivot_root": 41, "capset": 91, "mount_setattr": 442}}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

#: The unprivileged IDs the sandbox's root maps to when the caller is root.
NOBODY_UID, NOBODY_GID = 65534, 65534
#: Device nodes a runner gets: the harmless basics everywhere, the NVIDIA ones on cuda.
BASIC_DEVICES = ("null", "zero", "full", "random", "urandom")
#: System directories mounted read-only (those that exist; symlinks such as /lib -> usr/lib are recreated).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")


class SandboxError(RuntimeError):
    """The sandbox could not be set up (the reason names the failing step)."""


@dataclass(frozen=True)
class Limits:
    """rlimits and tmpfs sizes of one runner (`address_space` on the CPU only: CUDA reserves huge ranges)."""

    address_space: int | None = None
    cpu_seconds: int = 3600
    file_bytes: int = 2 << 30
    open_files: int = 4096
    extra_processes: int = 1024
    scratch_bytes: int = 1 << 30


@dataclass
class Plan:
    """What a runner's sandbox contains, computed in the fork server before it forks."""

    device: str
    limits: Limits
    binds: list[tuple[str, str]] = field(default_factory=list)
    symlinks: list[tuple[str, str]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    share_ipc: bool = False
    extra_binds: list[tuple[str, str]] = field(default_factory=list)  # read-only (host path, path inside)
    writable_binds: list[tuple[str, str]] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)  # listed while the sources were visible (staging)
    base: str = "/mnt"  # where the stage and the new root are built


@dataclass(frozen=True)
class Probe:
    kind: str  # "namespaces" or "none"
    reason: str = ""


_LIBC = None


def libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _LIBC.unshare.argtypes = [ctypes.c_int]
        _LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _LIBC


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")


def as_bytes(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def syscall(name: str, *args) -> int:
    number = _SYSCALLS.get(platform.machine(), {}).get(name)
    if number is None:
        raise SandboxError(f"no syscall number for {name} on {platform.machine()}")
    return libc().syscall(number, *args)


def _prctl(option: int, arg: int = 0) -> None:
    check(libc().prctl(option, arg, 0, 0, 0), f"prctl({option})")


def _package_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python_paths() -> list[str]:
    """Directories the runner imports from: the interpreter's prefixes and sys.path, but of a source checkout (the
    user's files) only the workbench package."""
    package = _package_dir()
    checkout = os.path.dirname(package)
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real in (os.path.realpath(checkout), os.path.realpath(os.getcwd())):
            continue
        paths.add(real)
    paths.add(os.path.realpath(package))
    # A prefix inside the checkout (a .venv) is fine; the checkout itself never is.
    paths.discard(os.path.realpath(checkout))
    return sorted(paths)


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def nvidia_devices() -> list[str]:
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        return []
    return [n for n in names if n.startswith("nvidia")]


def plan(device: str, limits: Limits, env: dict[str, str], share_ipc: bool = False,
         extra_binds: list[tuple[str, str]] | None = None,
         writable_binds: list[tuple[str, str]] | None = None) -> Plan:
    p = Plan(device=device, limits=limits, share_ipc=share_ipc, extra_binds=list(extra_binds or []),
             writable_binds=list(writable_binds or []))
    roots: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            p.symlinks.append((os.readlink(d), d))
        elif os.path.isdir(d):
            p.binds.append((d, d))
            roots.append(d)
    for path in _python_paths():
        if not _covered(path, roots):
            p.binds.append((path, path))
            roots.append(path)
    p.devices = list(BASIC_DEVICES) + (nvidia_devices() if device.startswith("cuda") else [])
    p.env = dict(env)
    extra = [*p.extra_binds, *p.writable_binds]
    p.base = _base_dir([src for src, _ in [*p.binds, *extra]] + [dst for _, dst in extra])
    return p


def write_id_maps(pid: int) -> None:
    """Map the child's user namespace from the parent: a root caller's sandbox root is nobody."""
    uid, gid = os.geteuid(), os.getegid()
    inner_uid, inner_gid = (NOBODY_UID, NOBODY_GID) if uid == 0 else (uid, gid)
    with open(f"/proc/{pid}/setgroups", "w") as f:
        f.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as f:
        f.write(f"0 {inner_uid} 1\n")
    with open(f"/proc/{pid}/gid_map", "w") as f:
        f.write(f"0 {inner_gid} 1\n")


def unshare_namespaces(share_ipc: bool) -> None:
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS
    if not share_ipc:
        flags |= CLONE_NEWIPC
    check(libc().unshare(flags), "unshare (user namespaces may be disabled here)")


#: Where the sandbox's private tmpfs may be mounted, by preference.
BASE_CANDIDATES = ("/mnt", "/media", "/srv", "/boot", "/home", "/var", "/run", "/tmp")


def _base_dir(paths: list[str]) -> str:
    """Where the stage and the new root are built: the first of BASE_CANDIDATES no source lives under."""
    for base in BASE_CANDIDATES:
        if os.path.isdir(base) and not os.path.islink(base) and \
                not any(path == base or path.startswith(base + "/") for path in paths):
            return base
    raise SandboxError(f"no directory to build the sandbox on: every one of {', '.join(BASE_CANDIDATES)} holds "
                       "a source")


#: What a root caller's runner keeps without namespaces, to reach its directories: DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER.
FILE_CAPABILITIES = (1, 2, 3)


def drop_privileges(keep: tuple[int, ...] = ()) -> None:
    """No capabilities in any set but `keep`, and none obtainable again (no_new_privs)."""
    lib = libc()
    lib.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if cap in keep:
            continue
        if lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    if keep and os.geteuid() == 0:
        mask = sum(1 << cap for cap in keep if cap < 32)
        data[0].effective = data[0].permitted = mask
    check(syscall("capset", ctypes.byref(header), ctypes.byref(data)), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def _processes_of(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{name}/task"))
    return count


def apply_limits(limits: Limits, outer_uid: int, process_baseline: int) -> None:
    """The runner's rlimits (RLIMIT_NPROC counts the outer user's processes system-wide: its baseline is added)."""
    def cap(kind: int, value: int) -> None:
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_NPROC, process_baseline + limits.extra_processes)
    cap(resource.RLIMIT_FSIZE, limits.file_bytes)
    cap(resource.RLIMIT_CPU, limits.cpu_seconds)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    if limits.address_space:
        cap(resource.RLIMIT_AS, limits.address_space)


def set_environment(env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)


def die_with_parent(expected_parent: int | None = None) -> None:
    """SIGKILL this process when its parent dies (a change of IDs clears it); exit now if `expected_parent` is gone."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(72)


def outer_process_baseline() -> tuple[int, int]:
    """(uid the sandbox maps to outside, processes that uid runs now), for RLIMIT_NPROC."""
    uid = NOBODY_UID if os.geteuid() == 0 else os.geteuid()
    return uid, _processes_of(uid)


_PROBE: Probe | None = None


def probe() -> Probe:
    """Can this machine make the runner's sandbox? A forked child tries (cached); KWB_SANDBOX=none turns it off."""
    global _PROBE
    if _PROBE is not None:
        return _PROBE
    if os.environ.get("KWB_SANDBOX", "").lower() == "none":
        _PROBE = Probe("none", "turned off with KWB_SANDBOX=none")
    elif sys.platform != "linux":
        _PROBE = Probe("none", f"no Linux namespaces on {sys.platform}")
    elif platform.machine() not in _SYSCALLS:
        _PROBE = Probe("none", f"no syscall table for {platform.machine()}")
    else:
        _PROBE = _probe_fork()
    return _PROBE


def _probe_fork() -> Probe:
    read_fd, write_fd = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: enter the namespaces, report the outcome, exit without running any cleanup
        code = 1
        try:
            os.close(read_fd)
            os.close(go_w)
            unshare_namespaces(share_ipc=False)
            os.write(write_fd, b"u")
            os.read(go_r, 1)
            os.write(write_fd, b"ok")
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            try:
                os.write(write_fd, f"error:{exc}".encode()[:400])
            except OSError:
                pass
        os._exit(code)
    os.close(write_fd)
    os.close(go_r)
    try:
        first = os.read(read_fd, 512)
        if first == b"u":
            try:
                write_id_maps(pid)
            except OSError as exc:
                os.write(go_w, b"x")
                os.waitpid(pid, 0)
                return Probe("none", f"cannot map user IDs: {exc}")
            os.write(go_w, b"g")
            first = os.read(read_fd, 512)
        os.waitpid(pid, 0)
    finally:
        os.close(read_fd)
        os.close(go_w)
    if first == b"ok":
        return Probe("namespaces")
    text = first.decode(errors="replace").removeprefix("error:")
    return Probe("none", text or "the probe child died")
