"""A persistent cache of CUDA candidates' builds keyed by source and toolchain, so an entry only serves its own source.
Only the judge writes it (docs/anti-cheating.md, cheats 20, 27), indexed by SHA-256 and checked on every read; runners
get entries read-only, and the copy out of a runner follows no link and refuses devices, FIFOs and sockets."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from workbench.eval.runner.build_hooks import MOUNT_POINT  # noqa: F401  the judge binds entries there

#: Largest build directory cached (bytes); a bigger one is not kept.
MAX_ENTRY_BYTES = 512 << 20


def cache_root() -> Path:
    base = os.environ.get("KWB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kernel-workbench")
    return Path(base) / "cuda-builds"


@lru_cache(maxsize=1)
def toolchain() -> str:
    """What changes a build: torch, its CUDA, nvcc, the GPU's compute capability."""
    import torch

    parts = [f"torch={torch.__version__}", f"cuda={torch.version.cuda}"]
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30).stdout
        parts.append("nvcc=" + (out.strip().splitlines()[-1] if out.strip() else "?"))
    except (OSError, subprocess.TimeoutExpired):
        parts.append("nvcc=missing")
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        parts.append(f"sm={major}.{minor}")
    return ";".join(parts)


def key(source: str, language: str, tools: str | None = None) -> str:
    blob = "\0".join([language, tools if tools is not None else toolchain(), source]).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _index(build: Path) -> dict[str, str]:
    files = sorted(p for p in build.rglob("*") if p.is_file() and not p.is_symlink())
    return {str(p.relative_to(build)): _digest(p) for p in files}


def lookup(entry_key: str) -> Path | None:
    """The entry's build directory when every file matches the index; else None (a mismatching entry is removed)."""
    entry = cache_root() / entry_key
    index_path = entry / "index.json"
    if not index_path.is_file():
        return None
    try:
        index = json.loads(index_path.read_text())
        build = entry / "build"
        if any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in build.rglob("*")):
            raise ValueError("the entry holds a link or a special file")
        if _index(build) != index.get("files"):
            raise ValueError("files do not match the index")
    except (OSError, ValueError):
        shutil.rmtree(entry, ignore_errors=True)
        return None
    return build


class RefusedCopy(Exception):
    """A runner's build directory holds something the judge will not copy."""


#: Most files and directories a build directory may hold.
MAX_ENTRY_FILES = 10_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_below(root: str | Path, relative: str) -> int:
    """A descriptor of `root`/`relative`, following no link below `root`."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in Path(relative).parts:
            if name in ("..", "/") or "/" in name:
                raise RefusedCopy(f"{relative!r} leaves the runner's root")
            if name == ".":
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise RefusedCopy(f"{name!r} in {relative!r} is not a plain directory ({exc.strerror})") from None
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


class _Budget:
    def __init__(self, max_bytes: int, max_files: int):
        self.bytes, self.files = max_bytes, max_files

    def take(self, nbytes: int, files: int = 0) -> None:
        self.bytes -= nbytes
        self.files -= files
        if self.bytes < 0 or self.files < 0:
            raise RefusedCopy("the build directory is larger than the cache keeps")


def _copy_file(dir_fd: int, name: str, dest: Path, budget: _Budget) -> None:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise RefusedCopy(f"{name!r} cannot be opened as a plain file ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedCopy(f"{name!r} is not a regular file")
        if info.st_nlink != 1:
            raise RefusedCopy(f"{name!r} is a hard link ({info.st_nlink} names)")
        budget.take(info.st_size, 1)
        with open(dest, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                budget.take(len(chunk))
                out.write(chunk)
        os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))  # build systems compare modification times
    finally:
        os.close(fd)


def _copy_dir(dir_fd: int, dest: Path, budget: _Budget) -> None:
    dest.mkdir()
    with os.scandir(dir_fd) as entries:
        names = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in entries]
    for name, is_dir, is_link in names:
        if is_link:
            raise RefusedCopy(f"{name!r} is a symbolic link")
        budget.take(0, 1)
        if is_dir:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise RefusedCopy(f"{name!r} is not a plain directory ({exc.strerror})") from None
            try:
                _copy_dir(child, dest / name, budget)
                info = os.fstat(child)
            finally:
                os.close(child)
            os.utime(dest / name, ns=(info.st_atime_ns, info.st_mtime_ns))
        else:
            _copy_file(dir_fd, name, dest / name, budget)


def copy_out(root: str | Path, relative: str, dest: str | Path, max_bytes: int = MAX_ENTRY_BYTES,
             max_files: int = MAX_ENTRY_FILES) -> None:
    """Copy `root`/`relative` to the new `dest` following no link; RefusedCopy (`dest` removed) on a link, a hard
    link, a special file, or past the limits."""
    fd = _open_below(root, relative)
    try:
        _copy_dir(fd, Path(dest), _Budget(max_bytes, max_files))
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(fd)


def store(entry_key: str, root: str | Path, relative: str = ".") -> Path | None:
    """Copy a runner's build directory into a new entry atomically; its build directory, or None."""
    root_dir = cache_root()
    root_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry_key}-", dir=root_dir))
    try:
        copy_out(root, relative, tmp / "build")
        files = _index(tmp / "build")
        if not files:
            raise RefusedCopy("no files")
        (tmp / "index.json").write_text(json.dumps({"files": files, "toolchain": toolchain()}, indent=1))
        final = root_dir / entry_key
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final / "build"
    except (OSError, RefusedCopy):
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def copy_entry(entry: str | Path, target: str | Path) -> None:
    """Copy an entry's build tree to `target`, modification times kept."""
    shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)


#: Where a runner finds its Triton cache inside the sandbox.
TRITON_MOUNT = "/tmp/triton"


def triton_dir(source: str, device: str) -> Path | None:
    """The Triton kernel cache of one source (GPU only), owned by the runner's user; None where it cannot be made."""
    if not device.startswith("cuda"):
        return None
    import triton

    return source_dir("triton", source, f"triton-{triton.__version__}")


def language_cache_dir(language: str, source: str, device: str) -> Path | None:
    """A language's JIT cache of one source (GPU only; CuTe DSL's), keyed by the source, the language and the
    toolchain, so no other source's runner ever sees it (cheat 20)."""
    return source_dir(language, source, f"{language}-{toolchain()}") if device.startswith("cuda") else None


def source_dir(kind: str, source: str, tools: str) -> Path | None:
    """The directory `kind`/key(source, tools) under the cache root, made and owned by the runner's user."""
    path = cache_root().parent / kind / key(source, tools)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:  # a root caller's runners run as nobody (sandbox.namespaces.write_id_maps)
            from workbench.sandbox.namespaces import NOBODY_GID, NOBODY_UID

            os.chown(path, NOBODY_UID, NOBODY_GID)
        os.chmod(path, 0o700)
    except OSError:
        return None
    return path
