"""`kwb doctor`: what this machine can do and what is missing, as data first and text second.

Every probe returns plain data (dicts and lists) so a notebook, a test or a bug report can use it without
parsing printed text. Probes never import the optional packages they look for (importing jupyterlab or
playwright just to say "present" would be slow and can have side effects); they look up the installed
distribution instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Extra:
    """An optional component: which feature needs it, whether it is here, and the command that adds it."""

    name: str
    feature: str
    present: bool
    version: str | None
    install: str


#: (name, feature, import modules that must all be present, distribution for the version, install command).
#: Modules are checked instead of distributions where the package is a binary (chromium).
_EXTRAS: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("jupyterlab", "notebooks and the Workbench UI", ("jupyterlab",), "jupyterlab", "pip install 'jupyterlab>=4.0'"),
    ("ipywidgets", "interactive widgets", ("ipywidgets",), "ipywidgets", "pip install 'ipywidgets>=8.1' anywidget"),
    ("plotly", "roofline and result figures", ("plotly",), "plotly", "pip install 'plotly>=5.20'"),
    ("papermill", "headless study runs (kwb study)", ("papermill", "nbclient"), "papermill",
     "pip install 'papermill>=2.5' nbclient ipykernel"),
    ("openai", "OpenAI-compatible LLM providers", ("openai",), "openai", "pip install 'openai>=1.30'"),
    ("anthropic", "Anthropic LLM provider", ("anthropic",), "anthropic", "pip install 'anthropic>=0.30'"),
    ("dask", "studies on a Dask cluster", ("dask", "distributed"), "dask", "pip install 'dask[distributed]>=2024.1'"),
    ("playwright", "browser tests of the JupyterLab UI", ("playwright",), "playwright", "pip install 'playwright>=1.40'"),
)
_BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _source_version() -> str:
    from workbench import __version__

    return __version__


def _torch_version() -> str | None:
    # torch.__version__ keeps the build tag (+cpu, +cu130) that the distribution metadata may drop.
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def versions() -> dict[str, str | None]:
    """Versions of Python, the workbench and its four required libraries (None when missing)."""
    return {
        "python": platform.python_version(),
        "kernel-workbench": _version("kernel-workbench") or f"{_source_version()} (from source, not pip-installed)",
        "torch": _torch_version(),
        "triton": _version("triton"),
        "numpy": _version("numpy"),
        "pandas": _version("pandas"),
    }


def cuda_devices() -> list[dict[str, Any]]:
    """Each visible CUDA device: name, compute capability, memory and L2 size. Empty without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        l2 = getattr(props, "L2_cache_size", None)
        out.append({
            "index": index,
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "l2_mib": round(l2 / 2**20, 1) if l2 else None,
            "multiprocessors": props.multi_processor_count,
        })
    return out


def interpreter() -> dict[str, Any]:
    """Whether Triton kernels will run under the interpreter, and why (it decides what timings mean)."""
    import torch

    forced = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")
    has_cuda = torch.cuda.is_available()
    if not has_cuda:
        reason = "no CUDA device: Triton kernels run under the interpreter (correct results, slow, 'interpreter' timings)"
    elif forced:
        reason = "TRITON_INTERPRET is set in this environment: device='cpu' evaluations use the interpreter"
    else:
        reason = "a CUDA device is present: Triton kernels compile; use --device cpu to run the interpreter"
    return {"used": not has_cuda, "forced_by_env": forced, "default_device": "cuda" if has_cuda else "cpu",
            "reason": reason}


def tools() -> dict[str, str | None]:
    """Command-line tools the GPU features use: nvcc (CUDA candidates), ncu (Nsight Compute metrics)."""
    return {name: shutil.which(name) for name in ("nvcc", "ncu")}


def extras() -> list[Extra]:
    """Optional components, present or missing, each with the exact command that installs it."""
    found = []
    for name, feature, modules, dist, install in _EXTRAS:
        present = all(_has_module(m) for m in modules)
        found.append(Extra(name, feature, present, _version(dist) if present else None, install))
    browser = next((path for b in _BROWSERS if (path := shutil.which(b))), None)
    found.append(Extra("chromium", "real-browser tests (with playwright)", browser is not None, browser,
                       "apt-get install chromium"))
    return found


def kernel_languages() -> list[dict[str, Any]]:
    """Every registered kernel language: its package's version here, or "not installed" with the command that adds
    it (its module is looked up, never imported)."""
    from workbench import languages

    found = []
    for lang in languages.LANGUAGES.values():
        if lang.distribution is None:
            continue
        present = lang.module is None or _has_module(lang.module)
        version = _torch_version() if lang.distribution == "torch" else _version(lang.distribution)
        found.append({"name": lang.name, "title": lang.title, "package": lang.distribution,
                      "version": (version or "present") if present else None,
                      "install": f"pip install -e '.[{lang.extra}]'" if lang.extra else f"pip install {lang.distribution}"})
    return found


def sandbox() -> dict[str, Any]:
    """Which sandbox candidates' runners get here (probed by entering fresh namespaces in a forked child), and the
    confinement that replaces it where namespaces cannot be made (Landlock, the syscall filter)."""
    from workbench.sandbox import landlock, syscall_filter
    from workbench.sandbox.namespaces import probe

    found = probe()
    filtered = platform.machine() in syscall_filter.AUDIT_ARCH and sys.platform == "linux"
    abi = landlock.abi()
    if found.kind == "namespaces":
        what = ("each candidate runs in a fresh runner with its own user, PID, mount and network namespaces: no "
                "network, read-only files without your home or project, a private scratch directory, no secrets"
                + (", and a syscall filter (no new namespaces, mounts, bpf, io_uring, ptrace)" if filtered else ""))
    else:
        fallback = [f"Landlock ABI {abi} confines its writes to its own directories" if abi else "",
                    "a syscall filter allows only Unix sockets" if filtered else ""]
        held = "; ".join(f for f in fallback if f) or "nothing confines it"
        what = (f"NONE ({found.reason}): candidates run in a separate process that can read your files and its "
                f"environment allow-list ({held}); every Result names its tier. On Linux, enable unprivileged user "
                "namespaces to get the sandbox")
    return {"kind": found.kind, "reason": found.reason, "what": what, "landlock_abi": abi,
            "syscall_filter": filtered}


def report() -> dict[str, Any]:
    """Everything `kwb doctor` shows, as one JSON-able dict."""
    return {
        "sandbox": sandbox(),
        "versions": versions(),
        "platform": {"system": platform.platform(), "cpu_cores": os.cpu_count(), "executable": sys.executable},
        "cuda": cuda_devices(),
        "interpreter": interpreter(),
        "tools": tools(),
        "languages": kernel_languages(),
        "extras": [asdict(e) for e in extras()],
    }


def format_report(data: dict[str, Any]) -> str:
    """The human text of a report() dict."""
    lines = ["versions"]
    lines += [f"  {name:<17} {value or 'MISSING'}" for name, value in data["versions"].items()]
    plat = data["platform"]
    lines += ["platform", f"  {plat['system']}, {plat['cpu_cores']} CPU cores", f"  python at {plat['executable']}"]
    lines.append("CUDA devices")
    if not data["cuda"]:
        lines.append("  none")
    for dev in data["cuda"]:
        l2 = f", L2 {dev['l2_mib']} MiB" if dev.get("l2_mib") else ""
        lines.append(f"  cuda:{dev['index']} {dev['name']} (sm {dev['capability']}, {dev['memory_gib']} GiB{l2}, "
                     f"{dev['multiprocessors']} SMs)")
    interp = data["interpreter"]
    lines += ["Triton interpreter", f"  {'ON' if interp['used'] else 'off'}: {interp['reason']}"]
    box = data.get("sandbox")
    if box:
        lines += ["sandbox", f"  {box['kind']}: {box['what']}"]
    lines.append("tools")
    for name, path in data["tools"].items():
        lines.append(f"  {name:<17} {path or 'not on PATH (only needed on a GPU machine)'}")
    lines.append("kernel languages")
    for lang in data.get("languages", []):
        state = lang["version"] or f"not installed  -> {lang['install']}"
        lines.append(f"  {lang['name']:<17} {lang['package']} {state}")
    lines.append("optional extras")
    for e in data["extras"]:
        state = f"present {e['version'] or ''}".rstrip() if e["present"] else f"MISSING  -> {e['install']}"
        lines.append(f"  {e['name']:<17} {state}   ({e['feature']})")
    missing = [e for e in data["extras"] if not e["present"]]
    if missing:
        lines.append("all Python extras at once: pip install -e '.[lab,llm,dask,dev,kernelbench]' (from a clone)")
    return "\n".join(lines)
