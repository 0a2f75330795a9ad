"""CUDA C++ built with `torch.utils.cpp_extension.load_inline`: `__global__` kernels in source strings. It needs a
CUDA device and nvcc; the judge keeps the builds, keyed by source and toolchain (`judge/runners/build_cache.py`),
and the runner's loader reads them through `runner/build_hooks.py`."""

from __future__ import annotations

import ast
import os
import re

from workbench.languages.base import Availability, Language

_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(?:static\s+)?void\s+(\w+)")

NEEDS_GPU = ("this candidate is CUDA C++ (torch.utils.cpp_extension.load_inline): it needs a CUDA device. "
             "Evaluate it with device='cuda' on a machine with a GPU and nvcc.")


class Cuda(Language):
    def detect(self, source: str) -> bool:
        return "load_inline" in source or "__global__" in source

    def has_kernel(self, tree: ast.Module, source: str) -> bool:
        return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "__global__" in n.value
                   for n in ast.walk(tree))

    def missing_kernel(self) -> str:
        return "no __global__ kernel in the CUDA sources"

    def own_kernel_names(self, tree: ast.Module | None, source: str) -> set[str]:
        return set(_GLOBAL.findall(source or ""))

    def availability(self, device: str) -> Availability:
        return Availability(True) if device.startswith("cuda") else Availability(False, NEEDS_GPU)

    def prepare_runner(self, device: str, workdir: str) -> None:
        """Builds go where the judge bound this source's cached build, through the wrapped `load_inline`."""
        from workbench.eval.runner.build_hooks import install_load_inline_cache, seed_build_dir

        builds = os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp/torch_extensions")
        seed_build_dir(builds)
        install_load_inline_cache(builds)


LANGUAGE = Cuda(name="cuda", title="CUDA (via torch.utils.cpp_extension.load_inline)", contract="cuda_contract",
                compiled=True)
