"""Loading a candidate's source as a module: a real .py file, imported after its language's own set-up
(`workbench/languages/`: build hooks, JIT caches, interpreter modes)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from workbench import languages

_counter = itertools.count()
_WORKDIR: str | None = None


class CandidateLoadError(Exception):
    """The candidate could not be imported or has no entry class; `log` holds the traceback."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message)


def _workdir(requested: str | None) -> str:
    """Where candidate files go: the job's or the runner's directory, else a temporary one."""
    global _WORKDIR
    requested = requested or os.environ.get("KWB_WORKDIR")
    if requested:
        os.makedirs(requested, exist_ok=True)
        return requested
    if _WORKDIR is None:
        _WORKDIR = tempfile.mkdtemp(prefix="kwb_cand_")
    return _WORKDIR


def interpreter_autotune() -> None:
    """Under the interpreter, `@triton.autotune` times configs by wall clock instead of through a GPU driver."""
    try:
        from triton.runtime import autotuner
    except Exception:  # pragma: no cover - triton missing
        return

    def wall_bench(kernel_call, quantiles=None, **_):
        start = time.perf_counter()
        kernel_call()
        ms = (time.perf_counter() - start) * 1e3
        return [ms, ms, ms] if quantiles else ms

    if not getattr(autotuner.Autotuner, "_kwb_interpreter", False):
        autotuner.Autotuner.do_bench = property(lambda self: self._do_bench or wall_bench)
        autotuner.Autotuner._kwb_interpreter = True


#: The entry KernelBench's format names; when a candidate lacks it, a class named `FALLBACK_ENTRY` is used instead.
DEFAULT_ENTRY, FALLBACK_ENTRY = "ModelNew", "Model"


def entry_class(module: Any, entry: str = DEFAULT_ENTRY) -> Any:
    """The class to build: `entry`, else (for the default entry) `Model`, as KernelBench's scripts accept."""
    cls = getattr(module, entry, None)
    if cls is None and entry == DEFAULT_ENTRY:
        cls = getattr(module, FALLBACK_ENTRY, None)
    return cls


def load_candidate(spec: dict[str, Any], device: str, workdir: str | None = None):
    """(module, entry class) of a candidate spec; every failure is a CandidateLoadError with a clear message."""
    language, entry = spec.get("language", "triton"), spec.get("entry", "ModelNew")
    available = languages.get(language).availability(device)
    if not available.runs:
        raise CandidateLoadError(available.message)
    if os.environ.get("TRITON_INTERPRET") == "1":
        interpreter_autotune()
    name = f"kwb_candidate_{next(_counter)}_{abs(hash(spec['source'])) % 10**8}"
    path = Path(_workdir(workdir)) / f"{name}.py"
    path.write_text(spec["source"])
    try:
        compile(spec["source"], str(path), "exec")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip()
        raise CandidateLoadError(f"syntax error at line {exc.lineno}: {exc.msg}" + (f"\n    {line}" if line else ""),
                                 traceback.format_exc(limit=0)) from None
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is the candidate's
        sys.modules.pop(name, None)
        tb = traceback.format_exc()
        own = [ln.strip() for ln in tb.splitlines() if str(path) in ln]
        where = f" ({own[-1]})" if own else ""
        what = "CUDA compilation failed" if language == "cuda" else "importing the candidate failed"
        fix = (f". Fix: install {exc.name.split('.')[0]!r} into the environment the workbench runs in, or drop the "
               "import") if isinstance(exc, ModuleNotFoundError) and exc.name else ""
        raise CandidateLoadError(f"{what}{where}: {type(exc).__name__}: {str(exc)[:1500]}{fix}", tb[-4000:]) from None
    cls = entry_class(module, entry)
    if cls is None:
        defined = sorted(k for k, v in vars(module).items() if isinstance(v, type) and v.__module__ == name)
        also = " (or, as KernelBench's scripts accept, a class named Model)" if entry == DEFAULT_ENTRY else ""
        raise CandidateLoadError(
            f"the candidate defines no {entry}{also}; a candidate must define `class {entry}(nn.Module)` with the "
            f"reference Model's constructor and forward. Classes found: {', '.join(defined) or 'none'}")
    if not callable(cls):
        raise CandidateLoadError(f"{entry} is not a class or callable ({type(cls).__name__})")
    return module, cls
