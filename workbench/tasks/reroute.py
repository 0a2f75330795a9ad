"""Rerouting the random draws of a task's `get_inputs` to a round's distribution (workbench.tasks.distributions).

`Reroute(dist)` is a torch function mode: while it is active, every floating random draw the task's code makes
(`torch.rand`, `randn`, their `_like` forms, `torch.normal`, the in-place `uniform_`, `normal_`, `exponential_`,
`cauchy_`, `torch.nn.init.uniform_` / `normal_`) returns values of the round's distribution, in the shape, dtype and
device the task asked for, and everything the task then builds from them (tril, a symmetric sum, softmax, abs) is
computed as written. Integer and discrete draws (randint, randperm, bernoulli, multinomial, random_, geometric_),
`log_normal_` and the fan-scaled initialisers (kaiming, xavier, trunc_normal) run as written: they carry structure
(index ranges, masks, a scale tied to a shape) that a generic draw would destroy.

Why a torch function mode and not replaced module attributes: a mode sees calls however the task spells them
(`from torch import rand` bound before the draw included), it lives on the calling thread's own mode stack (another
thread drawing at the same time is untouched), and leaving the `with` block removes it; nothing is patched.

Every value comes from the global RNG of the device it is drawn on, which the caller seeds, so a draw is a function
of (task, size, distribution, seed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch.overrides import TorchFunctionMode

from workbench.tasks.distributions import Distribution

#: Elements drawn per step when a distribution needs temporaries (heavy): bounds the extra memory on a GPU.
FILL_CHUNK = 1 << 24

_T = torch.Tensor


@dataclass
class DrawRecord:
    """What one run of get_inputs drew: the floating draws rerouted (by function name), the standard families they
    came from (uniform, normal, exponential, cauchy) and the draws left as written."""

    rerouted: list[str] = field(default_factory=list)
    families: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)

    def repeats_default(self, dist: Distribution) -> bool:
        """True when inputs of `dist` are distributed exactly as the task's own: no floating draw at all (inputs
        that are not random keep their values), or every draw already of the distribution's family ("uniform"
        inputs of a task that draws only with torch.rand)."""
        if dist.untouched or not self.rerouted:
            return True
        return dist.kind != "own" and self.families == {dist.kind}


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _without(kwargs: dict, *names: str) -> dict:
    return {k: v for k, v in kwargs.items() if k not in names}


# ---- the floating draws: where the tensor the task asked for comes from, and its location and scale --------------
# `how`: "new" (a factory: an empty tensor of the same size and options is filled), "like" (the same from
# empty_like), "self" / "tensor" (in place on that argument), "call" (the function runs, then its result is
# overwritten). `params(args, kwargs)` -> (loc, scale) with the task's draw = loc + scale * a standard draw of `family`.

def _unit(args, kwargs):
    return 0.0, 1.0


def _uniform_params(first: int, low: str, high: str):
    def params(args, kwargs):
        a, b = _arg(args, kwargs, first, low, 0.0), _arg(args, kwargs, first + 1, high, 1.0)
        return a, b - a
    return params


def _normal_params(first: int):
    def params(args, kwargs):
        return _arg(args, kwargs, first, "mean", 0.0), _arg(args, kwargs, first + 1, "std", 1.0)
    return params


def _exponential_params(args, kwargs):
    return 0.0, 1.0 / _arg(args, kwargs, 1, "lambd", 1.0)


def _cauchy_params(args, kwargs):
    return _arg(args, kwargs, 1, "median", 0.0), _arg(args, kwargs, 2, "sigma", 1.0)


class _Draw(NamedTuple):
    family: str
    how: str
    params: Callable[[tuple, dict], tuple[Any, Any]]


FLOAT_DRAWS: dict[Any, _Draw] = {
    torch.rand: _Draw("uniform", "new", _unit),
    torch.randn: _Draw("normal", "new", _unit),
    torch.rand_like: _Draw("uniform", "like", _unit),
    torch.randn_like: _Draw("normal", "like", _unit),
    torch.normal: _Draw("normal", "call", _normal_params(0)),
    _T.uniform_: _Draw("uniform", "self", _uniform_params(1, "from", "to")),
    _T.normal_: _Draw("normal", "self", _normal_params(1)),
    _T.exponential_: _Draw("exponential", "self", _exponential_params),
    _T.cauchy_: _Draw("cauchy", "self", _cauchy_params),
    torch.nn.init.uniform_: _Draw("uniform", "tensor", _uniform_params(1, "a", "b")),
    torch.nn.init.normal_: _Draw("normal", "tensor", _normal_params(1)),
}

#: Draws that run as written (module doc), recorded as kept.
KEPT_DRAWS = {
    torch.randint, torch.randint_like, torch.randperm, torch.bernoulli, torch.multinomial, torch.poisson,
    _T.bernoulli_, _T.random_, _T.geometric_, _T.log_normal_,
    torch.nn.init.trunc_normal_, torch.nn.init.xavier_uniform_, torch.nn.init.xavier_normal_,
    torch.nn.init.kaiming_uniform_, torch.nn.init.kaiming_normal_, torch.nn.init.orthogonal_, torch.nn.init.sparse_,
}


def _name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)


def _target(draw: _Draw, func: Any, args: tuple, kwargs: dict) -> Any:
    """The tensor whose values the rerouted draw replaces (allocated, an argument, or the function's result)."""
    if draw.how == "new":
        return torch.empty(*args, **_without(kwargs, "generator"))
    if draw.how == "like":
        return torch.empty_like(*args, **_without(kwargs, "generator"))
    if draw.how in ("self", "tensor"):
        return _arg(args, kwargs, 0, draw.how, None)
    return func(*args, **kwargs)


class Reroute(TorchFunctionMode):
    """While active on this thread, floating random draws follow `dist` (module doc); `record` collects what was
    drawn. Use as `with Reroute(dist, record): inputs = get_inputs()`."""

    def __init__(self, dist: Distribution, record: DrawRecord | None = None):
        super().__init__()
        self.dist = dist
        self.record = record if record is not None else DrawRecord()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        draw = FLOAT_DRAWS.get(func)
        if draw is None:
            if func in KEPT_DRAWS:
                self.record.kept.append(_name(func))
            return func(*args, **kwargs)
        if self.dist.kind == "own":  # the draw as written, times the scale
            out = func(*args, **kwargs)
            target = _arg(args, kwargs, 0, draw.how, None) if draw.how in ("self", "tensor") else out
            if _is_float(target):
                self._note(func, draw)
                if self.dist.scale != 1:
                    with torch.no_grad():
                        target.mul_(self.dist.scale)
            return out
        target = _target(draw, func, args, kwargs)
        if not _is_float(target):  # torch's own error, or a draw that is not floating
            return target if draw.how == "call" else func(*args, **kwargs)
        self._note(func, draw)
        loc, scale = draw.params(args, kwargs)
        fill_standard_(target, self.dist.kind)
        with torch.no_grad():
            if not (isinstance(scale, (int, float)) and scale == 1):
                target.mul_(scale)
            if not (isinstance(loc, (int, float)) and loc == 0):
                target.add_(loc)
        return target

    def _note(self, func: Any, draw: _Draw) -> None:
        self.record.rerouted.append(_name(func))
        self.record.families.add(draw.family)


def _is_float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def fill_standard_(t: torch.Tensor, kind: str) -> torch.Tensor:
    """Overwrite `t` with the standard draw of `kind` ("uniform", "normal", "heavy", "negative"; complex tensors get
    independent real and imaginary parts), from the global RNG of its device; returns `t`."""
    with torch.no_grad():
        real = torch.view_as_real(t) if t.is_complex() else t
        if real.is_contiguous():
            _fill_flat(real.view(-1), kind)
        else:
            dense = torch.empty(real.shape, dtype=real.dtype, device=real.device)
            _fill_flat(dense.view(-1), kind)
            real.copy_(dense)
    return t


def _fill_flat(flat: torch.Tensor, kind: str) -> None:
    for start in range(0, flat.numel(), FILL_CHUNK):
        part = flat[start:start + FILL_CHUNK]
        if kind == "uniform":
            part.uniform_()
        elif kind == "normal":
            part.normal_()
        elif kind == "negative":
            part.uniform_().mul_(-4).add_(0.5)
        elif kind == "heavy":
            part.copy_(_student_t3(part.numel(), part.device, torch.float64 if part.dtype == torch.float64 else
                                   torch.float32))
        else:
            raise ValueError(f"no standard draw of kind {kind!r}")


def _student_t3(n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Student-t with 3 degrees of freedom, Z / sqrt(chi2_3 / 3) with chi2_3 = 2 Exp(1) + Z'^2, clipped to +-50 so
    fp16 cannot overflow: occasional large values."""
    z = torch.empty(n, dtype=dtype, device=device).normal_()
    chi2 = torch.empty(n, dtype=dtype, device=device).exponential_().mul_(2)
    extra = torch.empty(n, dtype=dtype, device=device).normal_()
    chi2.addcmul_(extra, extra)
    return z.div_(chi2.div_(3).sqrt_()).clamp_(-50, 50)
