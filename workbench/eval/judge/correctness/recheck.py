"""The re-check of a timed call's output (`PairTimer._recheck`): element i is off unless |got_i - expected_i| <=
max(2 atol + 2 rtol |expected_i|, 2 k E) with expected_i finite, or got_i equals expected_i, or both are NaN. On a GPU
one pass of `compare_fused.count_off_kernel` (no output-sized temporary while timing); elsewhere torch, in slices."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch

from workbench.eval.judge.correctness.compare import ERROR_BUDGET_K
from workbench.eval.judge.correctness.compare_fused import count_off_kernel, flat_real, wide_dtype
from workbench.eval.wire.tensors import dtype_name

if TYPE_CHECKING:
    from workbench.tasks.task import Tolerance

#: Elements per slice of the torch paths (`count_off_torch`, `largest_error`).
MESSAGE_CHUNK = 1 << 26


def _slices(got: torch.Tensor, expected: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(got, expected) MESSAGE_CHUNK real elements at a time, in the rule's arithmetic dtype."""
    g, e = flat_real(got).to(expected.device), flat_real(expected)
    wide = wide_dtype(expected.dtype)
    for start in range(0, e.numel(), MESSAGE_CHUNK):
        yield g[start:start + MESSAGE_CHUNK].to(wide), e[start:start + MESSAGE_CHUNK].to(wide)


def count_off(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """Elements of `got` off `expected` (module doc; atol, rtol and floor = k E before doubling)."""
    if not (expected.is_cuda and got.is_cuda) or expected.numel() == 0:
        return count_off_torch(got, expected, atol, rtol, floor)
    with torch.cuda.device(expected.device):
        return count_off_kernel(got, expected, atol, rtol, floor)


def count_off_torch(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """The same count with torch, slice by slice."""
    bad = 0
    for gs, es in _slices(got, expected):
        bound = torch.clamp_min(atol + rtol * es.abs(), floor) * 2
        err = (gs - es).abs()
        off = (~(err <= bound) | ~torch.isfinite(es)) & ~((gs == es) | (torch.isnan(gs) & torch.isnan(es)))
        bad += int(off.sum())
    return bad


def largest_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest finite |got - expected| (for a mismatch's message)."""
    largest = float("-inf")
    for gs, es in _slices(got, expected):
        err = (gs - es).abs()
        finite = err[torch.isfinite(err)]
        if finite.numel():
            largest = max(largest, float(finite.max()))
    return largest if largest != float("-inf") else float("inf")


def mismatch(got: torch.Tensor, expected: torch.Tensor, tolerance: Callable[[str], Tolerance] | None,
             native_error: float) -> str:
    """Why `got` is not `expected` within the re-check's bound ("" when it is); other dtypes exactly."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"shape {tuple(got.shape)} {got.dtype}, expected {tuple(expected.shape)} {expected.dtype}"
    g = got.to(expected.device)
    if not (expected.is_floating_point() or expected.is_complex()):
        bad = int((g != expected).sum())
        return f"{bad} of {g.numel()} elements differ" if bad else ""
    tol = tolerance(dtype_name(expected.dtype)) if tolerance is not None else None
    atol, rtol = (tol.atol, tol.rtol) if tol is not None else (1e-5, 1e-5)
    bad = count_off(g, expected, atol, rtol, ERROR_BUDGET_K * native_error)
    if not bad:
        return ""
    count = expected.numel() * (2 if expected.is_complex() else 1)
    return f"{bad} of {count} elements off, largest error {largest_error(g, expected):.3g}"
