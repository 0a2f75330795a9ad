"""A persistent cache of CUDA candidates' builds, keyed by the candidate's source and the toolchain, so evaluating the
same CUDA source again does not compile it again (a `load_inline` build takes 45-70 s; a cached one loads in
seconds).

Only the judge writes the cache (CHEATS.md row 20): after a runner built a candidate, the judge copies the runner's
private build directory into a new entry and records a SHA-256 of every file in the entry's index. A runner gets an
entry read-only (bound into its sandbox, or copied into its directory without one) and copies it into its own
scratch before importing the candidate, so torch's build system finds everything up to date. On every read the
judge checks the files against the index; an entry that does not match is deleted, never used.

An entry only ever serves the exact source that built it: a candidate can at worst cache its own build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
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
    """Versions that change what a build produces: torch, its CUDA, nvcc, and the GPU's compute capability."""
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


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def lookup(entry_key: str) -> Path | None:
    """The entry's build directory when it exists and every file matches the index; else None (a mismatching
    entry is removed)."""
    entry = cache_root() / entry_key
    index_path = entry / "index.json"
    if not index_path.is_file():
        return None
    try:
        index = json.loads(index_path.read_text())
        build = entry / "build"
        actual = {str(p.relative_to(build)): _digest(p) for p in _files(build)}
        if actual != index.get("files"):
            raise ValueError("files do not match the index")
    except (OSError, ValueError):
        shutil.rmtree(entry, ignore_errors=True)
        return None
    return build


def store(entry_key: str, build_dir: str | Path) -> Path | None:
    """Copy a runner's build directory into a new entry (atomically; symlinks are kept as links, never followed).
    Returns the entry's build directory, or None when there is nothing to keep or it is too large."""
    src = Path(build_dir)
    if not src.is_dir():
        return None
    files = _files(src)
    if not files or sum(p.stat().st_size for p in files) > MAX_ENTRY_BYTES:
        return None
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry_key}-", dir=root))
    try:
        shutil.copytree(src, tmp / "build", symlinks=True)
        index = {"files": {str(p.relative_to(tmp / "build")): _digest(p) for p in _files(tmp / "build")},
                 "toolchain": toolchain()}
        (tmp / "index.json").write_text(json.dumps(index, indent=1))
        final = root / entry_key
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final / "build"
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def copy_entry(entry: str | Path, target: str | Path) -> None:
    """Copy an entry's build tree to `target`, keeping modification times (build systems compare them)."""
    shutil.copytree(entry, target, symlinks=True, dirs_exist_ok=True)


def triton_dir(source: str, device: str) -> Path | None:
    """The Triton kernel cache of one candidate source (GPU only: the interpreter compiles nothing), made for the
    runner's user: bound writable into that source's runners and no other's (module doc of
    `workbench.eval.judge.runner_start`). None where it cannot be made (the runner then compiles privately)."""
    if not device.startswith("cuda"):
        return None
    import triton

    path = cache_root().parent / "triton" / key(source, f"triton-{triton.__version__}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:  # a root caller's runners run as nobody (runner.sandbox.write_id_maps)
            from workbench.eval.runner.sandbox import NOBODY_GID, NOBODY_UID

            os.chown(path, NOBODY_UID, NOBODY_GID)
        os.chmod(path, 0o700)
    except OSError:
        return None
    return path
