"""CuTe DSL (`nvidia-cutlass-dsl`): `@cute.kernel` device functions launched from `@cute.jit` host functions that
forward calls. It needs an NVIDIA GPU (the DSL compiles for the device it finds). Its JIT file cache lives in a
directory the judge owns per source (`judge/runners/build_cache.language_cache_dir`), so one candidate's compiled
kernels are never another's. Coverage comes from the profiler: CuTe DSL names a kernel function `f`
'kernel_cutlass_f_<argument signature>_<n>'.
"""

from __future__ import annotations

import os

from workbench.languages.base import Availability, Language, imports_module, installed

#: Where the runner finds this source's JIT cache inside the sandbox.
CACHE_MOUNT = "/tmp/cute_dsl_cache"
#: CuTe DSL's profiler names: this prefix, the kernel function's name, an underscore.
KERNEL_PREFIX = "kernel_cutlass_"
INSTALL = "pip install -e '.[cute]'"


class CuteDsl(Language):
    def detect(self, source: str) -> bool:
        return imports_module(source, "cutlass.cute") or "from cutlass import cute" in source or \
            "@cute.kernel" in source

    def is_own_kernel(self, kernel: str, names: set[str]) -> bool:
        """Only a name CuTe DSL made ('kernel_cutlass_<name>_...') counts: a library kernel whose name merely
        contains the candidate's kernel name (cuBLAS's '..._gemm_...') does not."""
        text = kernel.strip().removeprefix("void ")
        return text.startswith(KERNEL_PREFIX) and any(
            text[len(KERNEL_PREFIX):] == n or text[len(KERNEL_PREFIX):].startswith(f"{n}_") for n in names)

    def availability(self, device: str) -> Availability:
        if not installed("cutlass"):  # the top-level name: finding it imports nothing (CuTe DSL's import is heavy)
            return Availability(False, f"this candidate is CuTe DSL (cutlass.cute), which is not installed here. "
                                       f"Install it with `{INSTALL}` (nvidia-cutlass-dsl), and evaluate with "
                                       "device='cuda': CuTe DSL needs an NVIDIA GPU.")
        if not device.startswith("cuda"):
            return Availability(False, "this candidate is CuTe DSL (cutlass.cute): CuTe DSL needs an NVIDIA GPU, "
                                       "and has no CPU interpreter. Evaluate it with device='cuda' on a machine "
                                       f"with a GPU (install: `{INSTALL}`).")
        return Availability(True)

    def prepare_runner(self, device: str, workdir: str) -> None:
        """The JIT cache: the judge's per-source directory when it bound one, else the runner's scratch."""
        cache = CACHE_MOUNT if os.path.isdir(CACHE_MOUNT) and os.access(CACHE_MOUNT, os.W_OK) else \
            os.path.join(workdir, "cute_dsl_cache")
        os.makedirs(cache, exist_ok=True)
        os.environ["CUTE_DSL_CACHE_DIR"] = cache


LANGUAGE = CuteDsl(name="cute", title="CuTe DSL (nvidia-cutlass-dsl, cutlass.cute)",
                   decorators=("cutlass.cute.kernel",), contract="cute_contract", module="cutlass",
                   distribution="nvidia-cutlass-dsl", extra="cute", compiled=True, cache_mount=CACHE_MOUNT)
