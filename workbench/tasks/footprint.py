"""How much memory one input set and the reference's output take at a size, found without allocating them.

The engine bounds the protocol's peak memory (docs/verdicts.md, "Memory"): it keeps several rotated copies of
the inputs, the native and float64 reference outputs and the candidate's outputs alive at once, and KernelBench's
L1 sizes reach 6 GB for a single input. To choose how many copies fit, and whether the float64 reference must run
on the host, it needs the sizes first. They come from running `get_inputs()` and the reference's forward under
torch's FakeTensorMode (tensors with shapes and dtypes but no storage: a 4096 x 393216 input costs nothing),
falling back to the meta device; an op with no fake/meta kernel (data-dependent shapes) leaves the output unknown.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.tasks.task import LoadedReference, Task

#: Exceptions that mean "cannot trace this without data", not "the reference is broken at this size".
UNTRACEABLE = {"NotImplementedError", "DynamicOutputShapeException", "DataDependentOutputException",
               "UnsupportedOperatorException", "UnsupportedFakeTensorException", "GuardOnDataDependentSymNode"}


@dataclass(frozen=True)
class Footprint:
    """Bytes of one input set, of the reference's output (None when its forward could not be traced) and of its
    parameters and buffers, with the shapes; `method` says how they were found ("fake" or "meta")."""

    input_bytes: int
    output_bytes: int | None
    parameter_bytes: int | None
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    output_shapes: list[tuple[int, ...]] | None = None
    method: str = "fake"
    #: Why the output is unknown, when it is.
    note: str = ""
    #: The exception type that stopped the forward ("" when it ran): "NotImplementedError" or a fake-tensor
    #: "...Exception" means no kernel for shapes alone; anything else means the reference fails at this size.
    failure: str = ""

    @property
    def untraceable(self) -> bool:
        """The forward needs real data (an op without a fake/meta kernel, data-dependent shapes)."""
        return self.failure in UNTRACEABLE

    @property
    def input_elements(self) -> int:
        return sum(_numel(s) for s in self.input_shapes)

    @property
    def output_elements(self) -> int | None:
        return None if self.output_shapes is None else sum(_numel(s) for s in self.output_shapes)

    def float64_output_bytes(self) -> int | None:
        """The float64 reference's output: every floating output at 8 bytes per element (an upper bound)."""
        return None if self.output_shapes is None else 8 * (self.output_elements or 0)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    seen: set[int] = set()
    out = []
    for leaf in tree_leaves(obj):
        if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out


def _nbytes(tensors: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@contextlib.contextmanager
def _mode(method: str) -> Iterator[None]:
    """FakeTensorMode or the meta device, with the noise a failed trace makes silenced: torch logs every op that
    fails under fake tensors at ERROR level, and a reference's own warnings are not news here."""
    import torch

    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if method == "fake":
                from torch._subclasses.fake_tensor import FakeTensorMode

                with FakeTensorMode(allow_non_fake_inputs=True):
                    yield
            else:
                with torch.device("meta"):
                    yield
    finally:
        log.setLevel(level)


def trace(ref: LoadedReference, size: dict[str, Any], method: str = "fake") -> Footprint:
    """Inputs, model and forward of `ref` at `size` under `method` ("fake" or "meta"). Raises when the inputs or
    the model cannot be built that way; an untraceable forward leaves the output None (with a note)."""
    import torch

    ref.apply_size(size)
    with _mode(method), torch.random.fork_rng(devices=[]):
        inputs = list(ref.module.get_inputs())
        init = list(ref.module.get_init_inputs())
        model = ref.module.Model(*init)
        state = []
        if isinstance(model, torch.nn.Module):
            model.eval()
            state = list(model.parameters()) + list(model.buffers())
        ins = _tensors(inputs)
        out_tensors: list[Any] | None
        note = failure = ""
        try:
            with torch.no_grad():
                out = model(*inputs)
            out_tensors = _tensors(out)
        except Exception as exc:  # noqa: BLE001 - data-dependent shapes, ops without fake/meta kernels
            failure = type(exc).__name__
            out_tensors, note = None, f"the reference's forward could not be traced ({failure}: {exc})"[:300]
    return Footprint(
        input_bytes=_nbytes(ins), output_bytes=None if out_tensors is None else _nbytes(out_tensors),
        parameter_bytes=_nbytes(state), input_shapes=[tuple(t.shape) for t in ins],
        output_shapes=None if out_tensors is None else [tuple(t.shape) for t in out_tensors], method=method, note=note,
        failure=failure)


def estimate_footprint(task: Task, size: dict[str, Any] | str | None = None, device: str = "cuda",
                       ref: LoadedReference | None = None) -> Footprint | None:
    """Bytes of one input set and of the reference output of `task` at `size` (a dict, a preset name, or None for
    `device`'s preset), without allocating them; None when not even the inputs can be built without data.
    `ref` reuses an already loaded reference (the engine has one)."""
    size = size if isinstance(size, dict) else task.size(size, device)
    ref = ref or task.load()
    best: Footprint | None = None
    for method in ("fake", "meta"):
        try:
            found = trace(ref, size, method)
        except Exception:  # noqa: BLE001 - try the next way; None if none works
            continue
        if found.output_shapes is not None:
            return found
        best = best or found
    return best
