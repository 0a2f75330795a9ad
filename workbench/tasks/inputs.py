"""Input distributions for correctness checks (CHEATS.md row 11: shape- and data-dependent shortcuts)."""

from __future__ import annotations

from typing import Any

from workbench.errors import UnknownNameError


def redraw(inputs: list[Any], dist: str, seed: int) -> list[Any]:
    """Replace every floating tensor by a same-shape, same-dtype draw from `dist` ("default" keeps them)."""
    import torch

    from workbench.tasks.task import DISTRIBUTIONS

    if dist not in DISTRIBUTIONS:
        raise UnknownNameError("distribution", dist, list(DISTRIBUTIONS))
    if dist == "default":
        return inputs
    gens: dict[str, Any] = {}
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            # Drawn on the tensor's own device: GPU-size inputs would take seconds to draw on the CPU.
            key = str(x.device)
            if key not in gens:
                gens[key] = torch.Generator(device=x.device).manual_seed(seed * 7919 + DISTRIBUTIONS.index(dist))
            out.append(_draw(tuple(x.shape), dist, gens[key], x.device).to(dtype=x.dtype))
        else:
            out.append(x)
    return out


def _draw(shape: tuple[int, ...], dist: str, gen, device: Any = "cpu") -> Any:
    import torch

    kw = {"generator": gen, "dtype": torch.float64 if str(device) == "cpu" else torch.float32, "device": device}

    if dist == "uniform":
        return torch.rand(shape, **kw)
    if dist == "normal":
        return torch.randn(shape, **kw)
    if dist == "heavy":
        # Student-t with 3 degrees of freedom: occasional large values, clipped so fp16 cannot overflow.
        z = torch.randn(shape, **kw)
        chi2 = torch.randn((3, *shape), **kw).pow(2).sum(0)
        return (z / torch.sqrt(chi2 / 3)).clamp(-50, 50)
    # "negative": mostly negative values of varied magnitude, a few positives.
    return -torch.rand(shape, **kw) * 4 + 0.5
