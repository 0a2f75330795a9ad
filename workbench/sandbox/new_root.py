"""Building a runner's new root inside its namespaces: a root caller stages the sources first, the first child builds
the root, the runner pivots into it. Nothing here ever mounts in the caller's mount namespace."""

from __future__ import annotations

import ctypes
import os

from workbench.sandbox.namespaces import CLONE_NEWNS, Plan, SandboxError, as_bytes, check, libc, syscall

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x1, 0x2, 0x4

#: The mount namespace the fork server lives in: the sandbox code refuses to mount anything there.
_HOST_MOUNT_NS = os.readlink("/proc/self/ns/mnt") if os.path.exists("/proc/self/ns/mnt") else ""


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _HOST_MOUNT_NS and os.readlink("/proc/self/ns/mnt") == _HOST_MOUNT_NS:
        raise SandboxError(f"refusing to mount {dst}: still in the caller's mount namespace")
    check(libc().mount(as_bytes(src), as_bytes(dst), as_bytes(fstype), flags, as_bytes(data)), f"mount {src} -> {dst}")


def _make_dir(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _make_target(path: str, like: str) -> None:
    """An empty directory or file to mount onto, matching what will be mounted."""
    if os.path.isdir(like):
        _make_dir(path)
    else:
        _make_dir(os.path.dirname(path))
        if not os.path.exists(path):
            with open(path, "w"):
                pass


def _read_only(target: str, nodev: bool = True) -> None:
    """Make a bind mount and everything below it read-only (mount_setattr, else per-mount remounts)."""
    attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (MOUNT_ATTR_NODEV if nodev else 0)

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(attrs, 0, 0, 0)
    AT_FDCWD = -100
    ret = syscall("mount_setattr", AT_FDCWD, as_bytes(target), AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret == 0:
        return
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (MS_NODEV if nodev else 0)
    mounts = [target]
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(target.rstrip("/") + "/"):
                mounts.append(point)
    for m in mounts:
        _mount(None, m, None, flags)


def _bind(source: str, target: str, recursive: bool = True) -> None:
    _mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))


def _sources(p: Plan) -> list[tuple[str, str]]:
    """(source, path inside) of everything bound into the sandbox."""
    items = [*p.binds, *p.extra_binds, *p.writable_binds]
    items += [(f"/dev/{name}", f"/dev/{name}") for name in p.devices]
    if p.device.startswith("cuda") and os.path.isdir("/dev/nvidia-caps"):
        items.append(("/dev/nvidia-caps", "/dev/nvidia-caps"))
    return [(src, dst) for src, dst in items if os.path.exists(src)]


def stage_sources(p: Plan) -> dict[str, str]:
    """For a root caller, before the user namespace: bind every source read-only under a staging tmpfs with root's
    rights; the runner (`nobody`) binds from there."""
    check(libc().unshare(CLONE_NEWNS), "unshare (mount namespace)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    p.sources = _sources(p)
    _mount("tmpfs", p.base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    _make_dir(p.base + "/.kwb-root")  # made here: the stage belongs to root; the runner mounts onto this directory
    staged = {}
    for src, dst in p.sources:
        target = p.base + "/.kwb-stage" + dst
        _make_target(target, src)
        _bind(src, target, recursive=os.path.isdir(src))
        if (src, dst) not in p.writable_binds:
            _read_only(target, nodev=not dst.startswith("/dev/"))
        staged[src] = target
    return staged


def build_root(p: Plan, staged: dict[str, str]) -> None:
    """Inside the new namespaces: a tmpfs root with every source bound read-only, a minimal /dev, private /dev/shm
    and /tmp, an empty /proc."""
    # Sources were listed before the IDs changed: an unprivileged runner may not even see a staged path's origin.
    sources = list(p.sources) if staged else _sources(p)
    if not staged:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("tmpfs", p.base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    root = p.base + "/.kwb-root"
    _make_dir(root)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    # The scratch /tmp first: a source that lives under /tmp (a checkout, a venv) is bound on top of it.
    _make_dir(root + "/tmp")
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={p.limits.scratch_bytes}")
    for sub in ("home", "triton", "torch_extensions", "cache", "work"):
        _make_dir(f"{root}/tmp/{sub}")
    for src, dst in sorted(sources, key=lambda item: item[1]):
        if dst.startswith("/dev/"):
            continue
        source = staged.get(src, src)
        _make_target(root + dst, source)
        _bind(source, root + dst)
        if (src, dst) not in p.writable_binds:
            _read_only(root + dst)
    for link_to, path in p.symlinks:
        if not os.path.lexists(root + path):
            os.symlink(link_to, root + path)
    # /dev: a tmpfs with the allowed nodes bound in, plus a private /dev/shm.
    dev = root + "/dev"
    _make_dir(dev)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755,size=1m")
    for src, dst in sources:
        if dst.startswith("/dev/"):
            source = staged.get(src, src)
            _make_target(root + dst, source)
            _bind(source, root + dst, recursive=os.path.isdir(source))
    _make_dir(dev + "/shm")
    _mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={p.limits.scratch_bytes}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    _make_dir(root + "/proc")


def enter_root(p: Plan) -> None:
    """In the runner: mount /proc, pivot into the new root, detach the old one, make / read-only."""
    root = p.base + "/.kwb-root"
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    _make_dir(root + "/.old")
    check(syscall("pivot_root", b".", b".old"), "pivot_root")
    os.chroot(".")
    os.chdir("/")
    check(libc().umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
