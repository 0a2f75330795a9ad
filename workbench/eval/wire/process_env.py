"""How the engine's processes start: the command that runs one of its modules, the versions they report, and the
environment the judge and every runner share, read at process start so both sides are timed alike (benchmarks/README.md:
a brief OpenMP spin, fixed malloc thresholds)."""

from __future__ import annotations

import os
import sys

#: Settings applied (unless the user set them) to the judge's and the runners' environments.
TIMING_ENV = {"GOMP_SPINCOUNT": "10000", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
              "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}

#: Environment variables a runner may see; nothing else (secrets a deny-list would miss) reaches it.
ENV_ALLOW = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
    "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
    "MKL_NUM_THREADS", "TRITON_INTERPRET", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH",
    "PYTHONHASHSEED", "CC", "CXX",
)


def versions() -> dict[str, str]:
    import torch

    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:  # pragma: no cover - triton missing
        out["triton"] = "missing"
    return out


def apply_timing_env(env: dict[str, str]) -> dict[str, str]:
    for key, value in TIMING_ENV.items():
        env.setdefault(key, value)
    return env


def module_command(module: str, *args: str) -> list[str]:
    """The command running `module` in a new interpreter, the working directory (any `workbench` in it) off sys.path."""
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", module, *args]
    bootstrap = f"import runpy, sys; sys.path.pop(0); runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", bootstrap, *args]


def runner_env(device: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The runner's whole environment: allow-listed variables of `base` and the sandbox's own."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k in ENV_ALLOW or k.startswith("LC_")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if device.startswith("cuda"):
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    apply_timing_env(env)  # the same OpenMP and malloc behaviour as the judge
    env.update(HOME="/tmp/home", TMPDIR="/tmp", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1",
               PYTHONDONTWRITEBYTECODE="1", TRITON_CACHE_DIR="/tmp/triton", TORCH_EXTENSIONS_DIR="/tmp/torch_extensions",
               XDG_CACHE_HOME="/tmp/cache")
    return env
