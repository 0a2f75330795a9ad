"""Issue 22 item 4, docs/anti-cheating.md, cheat 27: a runner points the CUDA build cache outside its sandbox. It replaces its
build directory (`/tmp/torch_extensions`) with a symbolic link to a host directory; the judge used to copy
`/proc/<pid>/root/tmp/torch_extensions` into the cache, resolving the link in its own filesystem, so the host's
files landed in an entry the next runner of that source can read and print. Now the judge walks below the runner's
root one name at a time and follows no link: every planted link (the directory itself, a directory or a file
inside it, a link on the way to it), hard link and FIFO gets nothing stored, and an honest build is still cached
with its modification times.

The CPU tests run a real sandboxed runner, let a candidate plant the links at import, and call the judge's copy on
the runner's real root; the GPU test is the whole path (a CUDA candidate, `evaluate`, the cache)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import workbench as wb
from redteam.attacks import softmax_task
from workbench.dispatch.pool import shutdown_workers
from workbench.eval.judge.runners import build_cache
from workbench.eval.judge.runners.process import ForkServer, RunnerProcess
from workbench.eval.wire import runner_messages as protocol
from workbench.sandbox import namespaces as sandbox

CANARY = "kwb-host-secret-5d21"
HONEST_MTIME_NS = 1_600_000_000_123_456_789
ATTACKS = ("torch_extensions", "case_inner_dir", "case_file_link", "case_hard_link", "case_fifo",
           "case_prefix_link/etc")

PLANT = '''
import os, shutil
import torch.nn as nn
base = os.environ["TORCH_EXTENSIONS_DIR"]
parent = os.path.dirname(base)
shutil.rmtree(base, ignore_errors=True)
os.symlink({host!r}, base)                        # the build directory itself is a link to the host


def made(name):
    path = os.path.join(parent, name, "ext")
    os.makedirs(path)
    with open(os.path.join(path, "build.ninja"), "w") as f:
        f.write("rule cc")
    return path


os.symlink({host!r}, os.path.join(made("case_inner_dir"), "more"))
os.symlink({host_file!r}, os.path.join(made("case_file_link"), "ext.so"))
first = os.path.join(made("case_hard_link"), "a.so")
with open(first, "w") as f:
    f.write("a")
os.link(first, os.path.join(os.path.dirname(first), "b.so"))
os.mkfifo(os.path.join(made("case_fifo"), "pipe"))
os.symlink("/", os.path.join(parent, "case_prefix_link"))
honest = made("case_honest")
with open(os.path.join(honest, "ext.so"), "wb") as f:
    f.write(b"\\x7fELF honest")
os.utime(os.path.join(honest, "ext.so"), ns=({mtime}, {mtime}))


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


def _host(tmp_path: Path) -> tuple[Path, Path]:
    host = tmp_path / "host"
    (host / ".ssh").mkdir(parents=True)
    (host / ".ssh" / "id_rsa").write_text(CANARY)
    secret = tmp_path / "secret.txt"
    secret.write_text(CANARY)
    return host, secret


def _cached_text(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _tiers() -> list[str]:
    return (["namespaces"] if sandbox.probe().kind == "namespaces" else []) + ["none"]


@pytest.fixture(params=_tiers())
def planted_runner(request, tmp_path, monkeypatch):
    """A real runner (in its namespaces, or without them) whose candidate planted the links at import."""
    if request.param == "none":
        monkeypatch.setenv("KWB_SANDBOX", "none")
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path / "cache"))
    host, secret = _host(tmp_path)
    server = ForkServer("cpu")
    runner = RunnerProcess.start(server, "cpu")
    try:
        source = PLANT.format(host=str(host), host_file=str(secret), mtime=HONEST_MTIME_NS)
        reply = runner.request(protocol.Load(source=source, language="torch", entry="ModelNew", device="cpu"),
                               {"loaded"}, 120)
        assert isinstance(reply, protocol.Loaded), reply
        yield runner
    finally:
        runner.close()
        server.close()


def test_no_planted_link_carries_host_files_into_the_build_cache(planted_runner, tmp_path):
    root, build = planted_runner.build_location()
    parent = os.path.dirname(build)
    started = time.monotonic()
    for i, name in enumerate(ATTACKS):
        relative = os.path.join(parent, name) if name != "torch_extensions" else build
        assert build_cache.store(f"attack{i}", root, relative) is None, name
        with pytest.raises(build_cache.RefusedCopy):
            build_cache.copy_out(root, relative, tmp_path / f"direct{i}")
        assert not (tmp_path / f"direct{i}").exists()
    assert time.monotonic() - started < 30  # the FIFO was never opened for a blocking read
    assert CANARY.encode() not in _cached_text(tmp_path / "cache")
    entry = build_cache.store("honest", root, os.path.join(parent, "case_honest"))
    assert entry is not None
    assert (entry / "ext" / "ext.so").read_bytes() == b"\x7fELF honest"
    assert (entry / "ext" / "ext.so").stat().st_mtime_ns == HONEST_MTIME_NS
    assert build_cache.lookup("honest") == entry


def test_an_entry_holding_a_link_is_never_served(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))
    build = tmp_path / "build" / "ext"
    build.mkdir(parents=True)
    (build / "ext.so").write_bytes(b"\x7fELF")
    assert build_cache.store("k", tmp_path / "build") is not None
    os.symlink("/etc", build_cache.cache_root() / "k" / "build" / "ext" / "planted")  # an entry from elsewhere
    assert build_cache.lookup("k") is None and not (build_cache.cache_root() / "k").exists()


CUDA_SOFTMAX = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = """
__global__ void softmax_rows(const float* x, float* y, long rows, long cols) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
    for (long j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
    float s = 0.f;
    for (long j = 0; j < cols; ++j) { float e = expf(xr[j] - m); yr[j] = e; s += e; }
    for (long j = 0; j < cols; ++j) yr[j] /= s;
}

torch::Tensor softmax_rows_op(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long rows = x.size(0), cols = x.size(1);
    softmax_rows<<<(rows + 127) / 128, 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="kwb_link_softmax", cpp_sources="torch::Tensor softmax_rows_op(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["softmax_rows_op"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_rows_op(x.contiguous())
'''
#: After building, the candidate replaces its build directory with a link to HOST.
LINK_BUILD_DIR = '''
_os, _shutil = __import__("o" + "s"), __import__("shu" + "til")
_build = _os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp/torch_extensions")
_shutil.rmtree(_build, ignore_errors=True)
_os.symlink(HOST, _build)
'''


@pytest.mark.gpu
def test_a_cuda_candidate_linking_its_build_dir_to_the_host_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path / "cache"))
    shutdown_workers()  # a judge started now sees the empty cache
    host, _ = _host(tmp_path)
    attack = LINK_BUILD_DIR.replace("HOST", repr(str(host)))
    cand = wb.Candidate(source=CUDA_SOFTMAX.replace("\n\nclass ModelNew", attack + "\n\nclass ModelNew", 1),
                        language="cuda")
    try:
        first = wb.evaluate(softmax_task(), cand, device="cuda", timeout=600, time_it=False)
        assert first.status == "ok", first.message
        assert first.protocol["compile_cache"] == "miss", first.protocol  # refused, not stored
        assert CANARY.encode() not in _cached_text(tmp_path / "cache")
        again = wb.evaluate(softmax_task(), cand, device="cuda", timeout=600, time_it=False)
        assert again.protocol["compile_cache"] == "miss" and CANARY not in again.message + again.log
    finally:
        shutdown_workers()
