"""Landlock for a runner without namespaces: every write right the kernel's ABI knows is granted only beneath the
runner's own directories, /dev/shm and a few device nodes (reads stay open); ABI 4+ refuses TCP, ABI 6+ keeps signals
and abstract Unix sockets inside. `restrict` never raises: it returns the ABI applied, or why not.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass

from workbench.sandbox.namespaces import nvidia_devices

# Syscall numbers: the same on x86_64 and aarch64 (new syscalls share one table).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# Filesystem access rights (linux/landlock.h).
WRITE_FILE = 1 << 1
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
# Network (ABI 4) and scopes (ABI 6).
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

#: Rights on files (the only ones a rule on a non-directory may grant).
_FILE_RIGHTS = WRITE_FILE | TRUNCATE
#: Device nodes a runner may open for writing when they exist.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def handled_writes(abi: int) -> int:
    """Every write right of `abi` (reads and execution stay allowed)."""
    rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | \
        MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def granted_in_dirs(abi: int) -> int:
    """Everything handled except making device nodes."""
    return handled_writes(abi) & ~(MAKE_CHAR | MAKE_BLOCK)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    if sys.platform != "linux":
        return 0
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


@dataclass(frozen=True)
class Outcome:
    abi: int
    note: str = ""


def _device_paths(device: str) -> list[str]:
    paths = [p for p in WRITABLE_DEVICES if os.path.exists(p)]
    return paths + ([f"/dev/{n}" for n in nvidia_devices()] if device.startswith("cuda") else [])


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock rule for {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def restrict(writable_dirs: list[str], device: str) -> Outcome:
    """Confine this process and its children to writing beneath `writable_dirs` (no_new_privs set already)."""
    version = abi()
    if version < 1:
        return Outcome(0, "Landlock is not available in this kernel")
    libc = _libc()
    attr = _RulesetAttr(handled_writes(version), NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return Outcome(0, f"Landlock refused the ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        dirs = [d for d in dict.fromkeys(writable_dirs) if d and os.path.isdir(d)]
        if os.path.isdir("/dev/shm"):
            dirs.append("/dev/shm")
        for path in dirs:
            _add_rule(libc, ruleset, path, granted_in_dirs(version))
        for path in _device_paths(device):
            _add_rule(libc, ruleset, path, _FILE_RIGHTS & handled_writes(version))
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            return Outcome(0, f"Landlock could not restrict the runner: {os.strerror(ctypes.get_errno())}")
    except OSError as exc:
        return Outcome(0, f"Landlock not applied ({exc})")
    finally:
        os.close(ruleset)
    missing = [what for what, since in (("TCP", 4), ("signal scoping", 6)) if version < since]
    return Outcome(version, f"Landlock ABI {version} has no {' or '.join(missing)} rules" if missing else "")
