"""What a Triton launch reads and writes, element by element, through triton-viz (an optional extra).

triton-viz runs a kernel on Triton's CPU interpreter and records every load and store of every program, or,
as a sanitizer, every access outside its tensor. The tutorials use it to show a kernel's access pattern and to
catch an unmasked load; they run without it. `triton_viz_status()` says in one line why it is not usable: not
installed, or installed for another Triton (triton-viz 3.0 is built against Triton 3.6's interpreter and fails
at import under 3.9). Tensors passed to a traced launch must be on the CPU: the trace is the interpreter's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from workbench.errors import WorkbenchError

INSTALL_HINT = "pip install 'kernel-workbench[viz]'"


class TritonVizUnavailable(WorkbenchError):
    """triton-viz cannot be used here; the message is `triton_viz_status()`'s line."""


def triton_viz_status() -> tuple[ModuleType | None, str]:
    """triton_viz when it imports with this Triton, else None; and one line saying which."""
    from importlib import metadata

    import triton

    try:
        import triton_viz
    except ModuleNotFoundError:
        return None, f"triton-viz is not installed ({INSTALL_HINT}): the trace is skipped"
    except Exception as exc:  # a triton-viz built for another Triton fails inside its own import
        # Its half-imported modules would make the next `import triton_viz` succeed on a broken package.
        for name in [n for n in sys.modules if n == "triton_viz" or n.startswith("triton_viz.")]:
            del sys.modules[name]
        try:
            version = metadata.version("triton-viz")
        except metadata.PackageNotFoundError:
            version = "?"
        reason = f"{type(exc).__name__}: {exc}"
        return None, (f"triton-viz {version} does not work with Triton {triton.__version__} (its import fails: "
                      f"{reason[:120]}); the trace is skipped")
    return triton_viz, f"triton-viz {metadata.version('triton-viz')} with Triton {triton.__version__}"


def _triton_viz() -> ModuleType:
    module, line = triton_viz_status()
    if module is None:
        raise TritonVizUnavailable(line)
    return module


def _cpu_only(args: Sequence[Any]) -> None:
    elsewhere = {i: str(a.device) for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.device.type != "cpu"}
    if elsewhere:
        raise WorkbenchError(f"a traced launch runs on Triton's CPU interpreter, but argument(s) {list(elsewhere)} "
                             f"are on {sorted(set(elsewhere.values()))}: pass CPU tensors (`.cpu()`)")


@dataclass(frozen=True)
class Access:
    """One load or store of one program: the byte offsets from `ptr` of its lanes, and which lanes were on."""

    program: tuple[int, int, int]
    kind: str  # "load" or "store"
    ptr: int
    offsets: np.ndarray
    mask: np.ndarray

    def elements(self, tensor: torch.Tensor) -> np.ndarray:
        """Element indices (into `tensor`, flat) of the lanes that were on; empty when the access is another's."""
        if self.ptr != tensor.data_ptr():
            return np.zeros(0, dtype=np.int64)
        return (np.asarray(self.offsets)[np.asarray(self.mask, dtype=bool)] // tensor.element_size()).ravel()

    def masked_off(self) -> int:
        return int(np.size(self.mask) - np.count_nonzero(self.mask))


def trace_accesses(kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> list[Access]:
    """Launch `kernel[grid](*args, **kwargs)` under triton-viz's tracer; every load and store, program by program."""
    _cpu_only(args)
    viz = _triton_viz()
    from triton_viz.core import data
    from triton_viz.core.trace import launches

    viz.trace(client="tracer")(kernel)[grid](*args, **kwargs)
    program = (0, 0, 0)
    accesses = []
    for record in launches[-1].records:
        if isinstance(record, data.Grid):
            program = tuple(record.idx)
        elif isinstance(record, (data.Load, data.Store)):
            accesses.append(Access(program, "load" if isinstance(record, data.Load) else "store", record.ptr,
                                   np.asarray(record.offsets), np.asarray(record.masks)))
    return accesses


def loads_per_element(accesses: Sequence[Access], tensor: torch.Tensor) -> np.ndarray:
    """How many times each element of `tensor` was loaded (lanes that were on), shaped like `tensor`."""
    counts = np.zeros(tensor.numel(), dtype=np.int64)
    for access in accesses:
        if access.kind == "load":
            np.add.at(counts, access.elements(tensor), 1)
    return counts.reshape(tuple(tensor.shape))


def loading_program(accesses: Sequence[Access], tensor: torch.Tensor, axis: int = 0) -> np.ndarray:
    """For each element of `tensor` (flat), the program id along `axis` that last loaded it; -1 where none did."""
    owner = np.full(tensor.numel(), -1, dtype=np.int64)
    for access in accesses:
        if access.kind == "load":
            owner[access.elements(tensor)] = access.program[axis]
    return owner


@dataclass(frozen=True)
class OutOfBounds:
    """An access the sanitizer found outside its tensor: which argument, and where in the kernel."""

    kind: str  # "load" or "store"
    argument: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"out-of-bounds {self.kind} of `{self.argument}` at line {self.line}: {self.code}"


def out_of_bounds(kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> list[OutOfBounds]:
    """Launch `kernel[grid](*args, **kwargs)` under triton-viz's sanitizer; every access it found out of bounds.

    The sanitizer reasons about each access's addresses symbolically, so it reports an unmasked lane past the end
    of a tensor even where the interpreter would have read neighbouring memory without a complaint."""
    _cpu_only(args)
    viz = _triton_viz()
    from triton_viz.clients import Sanitizer

    sanitizer = Sanitizer(abort_on_error=False)  # abort_on_error would call sys.exit
    viz.trace(client=sanitizer)(kernel)[grid](*args, **kwargs)
    found = []
    for record in getattr(sanitizer, "records", []):
        where = (record.user_code_tracebacks or [None])[-1]
        kind = "store" if "Store" in str(record.op_type) else "load"
        found.append(OutOfBounds(kind, str(record.tensor_name or "?"), int(getattr(where, "lineno", 0) or 0),
                                 str(getattr(where, "line_of_code", "") or "").strip()))
    return found


def describe(found: Sequence[OutOfBounds]) -> str:
    """One line per distinct finding (a launch of many programs repeats each)."""
    seen: dict[str, None] = {}
    for item in found:
        seen.setdefault(str(item), None)
    return "\n".join(seen) if seen else "no out-of-bounds access"
