"""The compile cache: entries written and validated by the judge, a build of the same call imported without
building again, and a tampered entry never used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.eval.judge.runners import build_cache as compile_cache

CPP = "int add_one(int x) { return x + 1; }"
SCRIPT = textwrap.dedent("""
    import sys, time
    from workbench.eval.runner.build_hooks import install_load_inline_cache
    install_load_inline_cache(sys.argv[1])
    from torch.utils.cpp_extension import load_inline
    t0 = time.perf_counter()
    ext = load_inline(name="kwb_cache_probe", cpp_sources=[{cpp!r}], functions=["add_one"])
    print("RESULT", ext.add_one(41), round(time.perf_counter() - t0, 2))
""")


def _run(build_root: Path) -> tuple[int, float]:
    env = {"TORCH_EXTENSIONS_DIR": str(build_root), "PATH": "/usr/local/bin:/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(cpp=CPP), str(build_root)], capture_output=True,
                         text=True, env=env, timeout=600)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line, out.stdout + out.stderr
    _, value, seconds = line.split()
    return int(value), float(seconds)


@pytest.mark.slow
def test_a_cached_build_is_imported_without_building_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path / "cache"))
    first_dir = tmp_path / "runner1"
    value, built = _run(first_dir)
    assert value == 42
    key = compile_cache.key("source", "cuda", tools="test-toolchain")
    assert compile_cache.store(key, first_dir) is not None  # the judge copies the runner's build directory
    entry = compile_cache.lookup(key)
    assert entry is not None
    second_dir = tmp_path / "runner2"  # a fresh runner, seeded from the entry
    compile_cache.copy_entry(entry, second_dir)
    library = second_dir / "kwb_cache_probe" / "kwb_cache_probe.so"
    stamp = library.stat().st_mtime_ns
    started = time.perf_counter()
    value, loaded = _run(second_dir)
    assert value == 42 and library.stat().st_mtime_ns == stamp  # imported, not rebuilt
    assert loaded < max(1.0, 0.25 * built), (built, loaded)
    assert time.perf_counter() - started < built + 30


def test_an_entry_whose_files_changed_is_deleted_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))
    build = tmp_path / "build"
    (build / "ext").mkdir(parents=True)
    (build / "ext" / "ext.so").write_bytes(b"\x7fELF honest")
    key = compile_cache.key("src", "cuda", tools="t")
    assert compile_cache.store(key, build) is not None and compile_cache.lookup(key) is not None
    planted = compile_cache.cache_root() / key / "build" / "ext" / "ext.so"
    planted.write_bytes(b"\x7fELF planted")
    assert compile_cache.lookup(key) is None
    assert not (compile_cache.cache_root() / key).exists()


def test_keys_follow_the_source_and_the_toolchain():
    a = compile_cache.key("x = 1", "cuda", tools="nvcc 13.0")
    assert a == compile_cache.key("x = 1", "cuda", tools="nvcc 13.0")
    assert a != compile_cache.key("x = 2", "cuda", tools="nvcc 13.0")
    assert a != compile_cache.key("x = 1", "cuda", tools="nvcc 12.8")
