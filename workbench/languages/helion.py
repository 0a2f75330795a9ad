"""Helion (`helion`): `@helion.kernel` functions written with PyTorch operations over `hl.tile` loops, compiled to
Triton. Autotuning happens at a kernel's first call, so that call gets the compile budget (`compile_timeout`) and
the configuration it chose is recorded in the Result's metadata. On a GPU the generated Triton kernels are named
'_helion_<function>'; on a CPU Helion's reference mode (HELION_INTERPRET=1) runs the kernel body eagerly, which
the runner counts as the kernel's launch, as it counts Triton's interpreted launches.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from workbench.languages.base import Availability, CallHook, Language, LaunchHook, imports_module, installed

#: The prefix Helion gives the Triton kernel it generates for a `@helion.kernel` function.
TRITON_PREFIX = "_helion_"
INSTALL = "pip install -e '.[helion]'"
#: Autotuning effort in the runner (whose environment is an allow-list, so the user's own HELION_* settings do not
#: reach it): a quick search fits the compile budget; a candidate's own `config=`, `configs=` or `autotune_effort=`
#: in its decorator takes precedence.
DEFAULT_EFFORT = "quick"


class Helion(Language):
    def detect(self, source: str) -> bool:
        return imports_module(source, "helion") or bool(re.search(r"@\s*helion\.kernel", source))

    def own_kernel_names(self, tree: Any, source: str) -> set[str]:
        """The kernel functions and the Triton kernels Helion generates from them."""
        names = super().own_kernel_names(tree, source)
        return names | {f"{TRITON_PREFIX}{n}" for n in names}

    def availability(self, device: str) -> Availability:
        if not installed("helion"):
            return Availability(False, f"this candidate is Helion, which is not installed here. Install it with "
                                       f"`{INSTALL}` (helion 1.5.0; it uses the torch and triton already installed).")
        return Availability(True)

    def prepare_runner(self, device: str, workdir: str) -> None:
        """On a CPU, Helion's reference mode instead of Triton's interpreter (Helion refuses both at once)."""
        os.environ.setdefault("HELION_AUTOTUNE_EFFORT", DEFAULT_EFFORT)
        os.environ.setdefault("HELION_AUTOTUNE_PROGRESS_BAR", "0")  # its bar would fill the runner's bounded log
        # Autotuning benchmarks in the runner itself: Helion's benchmark subprocess gets the inputs through a file,
        # which at a real problem's size passes the runner's file-size cap (and the judge already bounds the time).
        os.environ.setdefault("HELION_AUTOTUNE_BENCHMARK_SUBPROCESS", "0")
        os.environ.setdefault("HELION_CACHE_DIR", os.path.join(os.environ.get("TRITON_CACHE_DIR", workdir), "helion"))
        if not device.startswith("cuda"):
            os.environ.pop("TRITON_INTERPRET", None)
            os.environ["HELION_INTERPRET"] = "1"

    def kernel_objects(self, module: Any) -> list[tuple[str, Any]]:
        """The module's Helion kernels; none unless the candidate imported Helion (importing it here would cost every
        runner of every language seconds)."""
        kernels = sys.modules.get("helion.runtime.kernel")
        kernel_type = getattr(kernels, "Kernel", None)
        if not isinstance(kernel_type, type):
            return []
        from workbench.languages.base import objects_of_type

        return objects_of_type(module, kernel_type)

    def launch_hook(self, obj: Any) -> LaunchHook:
        return CallHook(obj)

    def probe_target(self) -> tuple[type, str] | None:
        """In reference mode a kernel's launch is the call of its `Kernel` object."""
        try:
            from helion.runtime.kernel import Kernel
        except Exception:
            return None
        return Kernel, "__call__"

    def tuned_config(self, module: Any) -> str:
        """'kernel: Config(...)' per kernel that bound a configuration, from its bound kernels."""
        chosen = []
        for name, obj in self.kernel_objects(module):
            for bound in _bound_kernels(obj):
                config = getattr(bound, "_config", None)
                if config is not None:
                    chosen.append(f"{name}: {config!r}")
        return "; ".join(dict.fromkeys(chosen))[:2000]


def _bound_kernels(kernel: Any) -> list[Any]:
    """The kernel's bound (specialized) kernels, wherever this Helion keeps them."""
    found: list[Any] = []
    for attr in ("_bound_kernels", "_dispatch_cache"):
        cache = getattr(kernel, attr, None)
        if isinstance(cache, dict):
            found += list(cache.values())
    prepared = getattr(kernel, "_prepared_call", None)
    if prepared is not None and getattr(prepared, "bound", None) is not None:
        found.append(prepared.bound)
    return found


LANGUAGE = Helion(name="helion", title="Helion", decorators=("helion.kernel",), contract="helion_contract",
                  module="helion", distribution="helion", extra="helion", compiled=True, tracks_launches=True,
                  tunes_on_first_call=True, interpreted_on_cpu=True,
                  cpu_runtime="Helion's reference mode")
