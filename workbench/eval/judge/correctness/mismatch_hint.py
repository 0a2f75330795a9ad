"""Why a mismatch may have happened, in words added to its message; only a hint, never a verdict. Reduced precision
(docs/anti-cheating.md, cheat 29): an output much closer to the reference recomputed with inputs and parameters
rounded to TF32 (float16's mantissa too) or bfloat16 than to the float64 one. Random draws: a reference drawing random
numbers is matched only by a candidate drawing the same ones (docs/verdicts.md; by default not torch.compile)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from workbench.eval.judge.reference.rounds import draws_random_numbers
from workbench.eval.wire.tensors import as_list
from workbench.eval.wire.timed_loop import seed_rng
from workbench.tasks.precision import round_to_tf32

#: The output is this precision's when its distance to the emulation is at most this share of its error.
EXPLAINED = 0.25
#: Inputs and parameters above this many bytes are not copied for a hint.
MAX_BYTES = 1 << 30


def _to(dtype: torch.dtype) -> Callable[[Any], Any]:
    def rounded(x: Any) -> Any:
        return x.to(dtype).to(x.dtype) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
    return rounded


#: (name, how a float32 tensor is rounded, what to do about it).
EMULATIONS: tuple[tuple[str, Callable[[Any], Any], str], ...] = (
    ("TF32", round_to_tf32,
     "a tl.dot in TF32 (Triton's default for float32) or float16 operands give this; compute in full precision (in "
     "Triton tl.dot(..., input_precision=\"ieee\"); in PyTorch torch.backends.cuda.matmul.allow_tf32 = False), or "
     "evaluate with precision=\"tf32\" (kwb eval --precision tf32) if TF32 is acceptable for this task"),
    ("bfloat16", _to(torch.bfloat16),
     "load and compute in float32 as the task's dtype asks, or evaluate a bfloat16 size of the task"),
)

RANDOM_DRAWS = ("; the reference draws random numbers in its forward, and each call is seeded the same on both sides: "
                "draw the same numbers in the same order from torch's global generator (torch.compile draws its own "
                "unless torch._inductor.config.fallback_random = True)")


def _bytes(model: Any, inputs: list[Any]) -> int:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def diagnose(model: Any, inputs: list[Any], call_seed: int, out: Any, ref64: Any, device: str) -> str:
    """Words for a mismatch: the reduced precision its errors match, else that the reference draws random numbers."""
    pairs = [(o, r) for o, r in zip(as_list(out), as_list(ref64), strict=False) if isinstance(o, torch.Tensor) and
             isinstance(r, torch.Tensor) and o.dtype == torch.float32 and o.shape == r.shape and o.numel()]
    if not pairs or _bytes(model, inputs) > MAX_BYTES:
        return ""
    try:
        for name, rounding, fix in EMULATIONS:
            emulated = as_list(_run_rounded(model, inputs, call_seed, rounding))
            explained = True
            for (o, r), e in zip(pairs, emulated, strict=False):
                o64, r64 = o.detach().double(), r.detach().to(o.device).double()
                error = float((o64 - r64).abs().max())
                gap = float((o64 - e.detach().to(o.device).double()).abs().max())
                explained = explained and error > 0 and gap <= EXPLAINED * error
            if explained:
                return f"; the errors match {name} rounding of the inputs: {fix}"
        return RANDOM_DRAWS if draws_random_numbers(model, inputs, device) else ""
    except Exception:  # noqa: BLE001 - only a hint: a reference that cannot be rerun this way gives none
        return ""


def _run_rounded(model: Any, inputs: list[Any], call_seed: int, rounding: Callable[[Any], Any]) -> Any:
    rounded_model = copy.deepcopy(model)
    with torch.no_grad():
        if isinstance(rounded_model, torch.nn.Module):
            for t in list(rounded_model.parameters()) + list(rounded_model.buffers()):
                t.copy_(rounding(t))
        seed_rng(call_seed)
        return rounded_model(*[rounding(x) for x in inputs])
