"""Drawing a task's inputs for one round: its own `get_inputs`, seeded, with the random draws rerouted to the round's
distribution (workbench.tasks.distributions, workbench.tasks.reroute), on the target device.

Why the task's own code: the structure it builds after drawing (a lower triangle in KernelBench L1/15, a symmetric
matrix in L1/13, probability rows for a KL divergence, class indices for a loss) is part of the problem; a correct
kernel may rely on it (skip the zero half of a triangle), and inputs without it judge a different problem.

Why on the device: GPU-size inputs drawn on the CPU and copied take seconds. A task whose code cannot run there (it
mixes in a CPU tensor) is drawn on the CPU and moved; the caller is told in a note.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.seeding import seed_all
from workbench.tasks.distributions import Distribution, get_distribution
from workbench.tasks.reroute import FLOAT_DRAWS, DrawRecord, Reroute


def _rng_forked(device: str):
    on_gpu = str(device).startswith("cuda")
    return torch.random.fork_rng(devices=[torch.device(device)] if on_gpu else [])


def draw_inputs(get_inputs: Callable[[], Any], dist: str | Distribution, seed: int, device: str = "cpu",
                move_to: str | None = None, record: DrawRecord | None = None) -> list[Any]:
    """`get_inputs()` run on `device` with the global RNG seeded for (`dist`, `seed`) and its floating draws
    rerouted to `dist` ("default": the task's code untouched); tensors are then moved to `move_to` (default:
    `device`). `record`, if given, collects what was drawn. The global RNG is left as it was."""
    chosen = get_distribution(dist)
    with _rng_forked(device):
        seed_all(chosen.seed(seed))
        with torch.device(device):
            mode = Reroute(chosen, record) if not chosen.untouched or record is not None else contextlib.nullcontext()
            with mode:
                inputs = list(get_inputs())
    where = move_to or device
    return [x.to(where) if isinstance(x, torch.Tensor) else x for x in inputs]


# ---- refilling input tensors in place ---------------------------------------------------------------------------

class _DrawInto(torch.overrides.TorchFunctionMode):
    """Default-distribution draws (`torch.rand`, `randn`, their `_like` forms) whose size and options match a target
    not yet used are drawn straight into that target: the same values (the same RNG calls), no new allocation."""

    def __init__(self, targets: list[Any]):
        super().__init__()
        self.free = [t for t in targets if isinstance(t, torch.Tensor) and t.is_contiguous()]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        draw = FLOAT_DRAWS.get(func)
        if draw is None or draw.how not in ("new", "like") or set(kwargs) - {"dtype", "device", "layout"}:
            return func(*args, **kwargs)
        if draw.how == "new":
            probe = torch.empty(0, **kwargs)  # the dtype and device the draw would have (the device context applies)
            shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else tuple(args)
        else:
            like = args[0]
            probe = torch.empty(0, dtype=kwargs.get("dtype") or like.dtype, device=kwargs.get("device") or like.device)
            shape = tuple(like.shape)
        for k, t in enumerate(self.free):
            if tuple(t.shape) == shape and t.dtype == probe.dtype and t.device == probe.device:
                del self.free[k]
                with torch.no_grad():
                    return t.uniform_() if draw.family == "uniform" else t.normal_()
        return func(*args, **kwargs)


def refill_inputs(get_inputs: Callable[[], Any], targets: list[Any], seed: int, device: str = "cpu") -> None:
    """Overwrite the tensors of `targets` (an input set as `draw_inputs(..., "default", ...)` returned it) with the
    default inputs of `seed`, drawn on `device`: the same values `draw_inputs(get_inputs, "default", seed, ...)`
    gives. Draws whose result is an input as is go straight into its tensor; inputs built from draws (a triangle, a
    symmetric sum) are computed and copied in. Non-tensor entries are left alone."""
    with _rng_forked(device):
        seed_all(seed)
        with torch.device(device), _DrawInto(targets):
            fresh = list(get_inputs())
    if len(fresh) != len(targets):
        raise TaskError(f"get_inputs returned {len(fresh)} inputs where {len(targets)} are to be refilled")
    pending = []
    for k, (old, new) in enumerate(zip(targets, fresh, strict=True)):
        if not isinstance(old, torch.Tensor):
            continue
        if not isinstance(new, torch.Tensor) or new.shape != old.shape:
            raise TaskError(f"get_inputs returned input {k} as {_describe(new)} where the tensor to refill is "
                            f"{_describe(old)}: the task's inputs must keep their shapes at one size")
        if _same_view(new, old):
            continue
        # A fresh input that lives in another target's memory is copied out before any target is overwritten.
        pending.append((old, new.clone() if any(_overlaps(new, t) for t in targets) else new))
    with torch.no_grad():
        for old, new in pending:
            old.copy_(new)


def _describe(x: Any) -> str:
    return f"a tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype \
        and a.device == b.device


def _overlaps(a: torch.Tensor, b: Any) -> bool:
    return isinstance(b, torch.Tensor) and a.device == b.device and a.untyped_storage().data_ptr() == \
        b.untyped_storage().data_ptr()
