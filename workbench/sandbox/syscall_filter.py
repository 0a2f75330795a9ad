"""The runner's syscall filter (docs/anti-cheating.md, cheat 21): a seccomp deny-list (an allow-list would break on the
next driver) of new namespaces, mounts, bpf, userfaultfd, keyrings, perf_event_open, io_uring, ptrace, modules and
kexec; `clone3` answers ENOSYS so libc uses `clone`, whose CLONE_NEW* flags are refused; `deny_sockets`: AF_UNIX only.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
import sys

#: Audit architecture of each supported machine (linux/audit.h) and its syscall numbers.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000

#: Denied syscalls (EPERM). Numbers from asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64).
DENIED = {
    "unshare": (272, 97), "setns": (308, 268),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "move_mount": (429, 429),
    "open_tree": (428, 428), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "mount_setattr": (442, 442), "open_tree_attr": (467, 467),
    "bpf": (321, 280), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "perf_event_open": (298, 241),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
}
#: Syscalls whose arguments the filter inspects, and clone3 (answered ENOSYS so the C library uses clone).
SPECIAL = {"clone": (56, 220), "clone3": (435, 435), "socket": (41, 198)}
_COLUMN = {"x86_64": 0, "aarch64": 1}

#: clone(2) flags that make new namespaces (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET).
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AF_UNIX = 1

# ---- classic BPF ---------------------------------------------------------------------------------------------------
_LD_W_ABS = 0x20   # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15      # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35      # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45     # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06      # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian machines: the
# low word of args[0] is at offset 16).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

Instruction = tuple[int, int, int, int]  # (code, jt, jf, k)


def ret_errno(err: int) -> int:
    return _RET_ERRNO | (err & 0xFFFF)


def _deny(number: int, err: int) -> list[Instruction]:
    """`if nr == number: return -err` (the accumulator holds nr)."""
    return [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, ret_errno(err))]


def program(machine: str, deny_sockets: bool = False) -> list[Instruction]:
    """The filter for `machine` ("x86_64" or "aarch64") as (code, jt, jf, k) instructions."""
    col = _COLUMN[machine]
    prog: list[Instruction] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH[machine]),
        (_RET_K, 0, 0, ret_errno(errno.ENOSYS)),  # another ABI (i386 on x86_64, compat): nothing through it
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":  # the x32 ABI shares the audit arch and sets this bit in the number
        prog += [(_JGE_K, 0, 1, _X32_SYSCALL_BIT), (_RET_K, 0, 0, ret_errno(errno.ENOSYS))]
    for numbers in DENIED.values():
        prog += _deny(numbers[col], errno.EPERM)
    prog += _deny(SPECIAL["clone3"][col], errno.ENOSYS)
    if deny_sockets:
        prog += [
            (_JEQ_K, 0, 4, SPECIAL["socket"][col]),
            (_LD_W_ABS, 0, 0, _ARG0_LOW),
            (_JEQ_K, 0, 1, AF_UNIX),
            (_RET_K, 0, 0, RET_ALLOW),
            (_RET_K, 0, 0, ret_errno(errno.EAFNOSUPPORT)),
        ]
    prog += [
        (_JEQ_K, 0, 3, SPECIAL["clone"][col]),
        (_LD_W_ABS, 0, 0, _ARG0_LOW),
        (_JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS),
        (_RET_K, 0, 0, ret_errno(errno.EPERM)),
        (_RET_K, 0, 0, RET_ALLOW),
    ]
    return prog


def evaluate(prog: list[Instruction], nr: int, arch: int, arg0: int = 0) -> int:
    """Run `prog` on one syscall as the kernel would (the subset of BPF it uses): the action it returns."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == _LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == _RET_K:
            return k
        else:
            taken = {_JEQ_K: acc == k, _JGE_K: acc >= k, _JSET_K: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def install(deny_sockets: bool = False) -> str | None:
    """Install the filter on this single-threaded process and its children, no_new_privs first; None, else why not."""
    machine = platform.machine()
    if sys.platform != "linux":
        return f"no seccomp on {sys.platform}"
    if machine not in AUDIT_ARCH:
        return f"no syscall table for {machine}"
    prog = program(machine, deny_sockets)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        return f"no_new_privs refused: {errno.errorcode.get(err, err)}"
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        return f"seccomp filter refused by the kernel: {errno.errorcode.get(err, err)}"
    return None
