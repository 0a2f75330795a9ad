"""The re-check of a timed call's output in one pass over the GPU's memory (`timing.PairTimer._recheck`).

Every timed round re-checks a few calls' outputs against the reference's outputs on exactly those inputs, while the
timing holds the device. Elementwise in torch the rule below took some twenty kernels and as many temporaries the
size of the output: 3.6 ms for a 8192 x 8192 fp32 softmax, as long as the round's timed batches themselves, and
five output-sized float32 temporaries (40 GB for an 8 GB output, more than the GPU had beside the pool). A Triton
kernel reads both outputs once and counts the elements off in registers: no temporary at all.

The rule is `mismatch`'s: element i is off unless
    |got_i - expected_i| <= max(2 atol + 2 rtol |expected_i|, 2 k E)  with expected_i finite,
or got_i equals expected_i (equal infinities), or both are NaN. Arithmetic in float32 for outputs of 32 bits or fewer,
float64 for float64; complex outputs as their real and imaginary parts.

Off a GPU (or for an empty output) `count_off_torch` counts the same elements with torch, in slices; the tests hold
the two to the same counts. Integer outputs never come here: they are compared exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.eval.judge.correctness.compare import ERROR_BUDGET_K
from workbench.eval.judge.correctness.compare_fused import count_off_kernel, flat_real, wide_dtype
from workbench.eval.wire.tensors import dtype_name

#: Elements per slice when the largest error is measured for a message (only after a mismatch was found).
MESSAGE_CHUNK = 1 << 26


def count_off(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """Elements of `got` off `expected` under the module's rule (atol, rtol and floor = k E before doubling).
    `got` and `expected` have the same shape and a floating or complex dtype."""
    if not (expected.is_cuda and got.is_cuda) or expected.numel() == 0:
        return count_off_torch(got, expected, atol, rtol, floor)
    with torch.cuda.device(expected.device):
        return count_off_kernel(got, expected, atol, rtol, floor)


def count_off_torch(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """The same count with torch, slice by slice (no temporary larger than MESSAGE_CHUNK elements)."""
    g, e = flat_real(got).to(expected.device), flat_real(expected)
    wide = wide_dtype(expected.dtype)
    bad = 0
    for start in range(0, e.numel(), MESSAGE_CHUNK):
        es, gs = e[start:start + MESSAGE_CHUNK].to(wide), g[start:start + MESSAGE_CHUNK].to(wide)
        bound = torch.clamp_min(atol + rtol * es.abs(), floor) * 2
        err = (gs - es).abs()
        off = (~(err <= bound) | ~torch.isfinite(es)) & ~((gs == es) | (torch.isnan(gs) & torch.isnan(es)))
        bad += int(off.sum())
    return bad


def largest_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest finite |got - expected|, slice by slice (for the message of a mismatch)."""
    g, e = flat_real(got).to(expected.device), flat_real(expected)
    wide = wide_dtype(expected.dtype)
    largest = float("-inf")
    for start in range(0, e.numel(), MESSAGE_CHUNK):
        err = (g[start:start + MESSAGE_CHUNK].to(wide) - e[start:start + MESSAGE_CHUNK].to(wide)).abs()
        finite = err[torch.isfinite(err)]
        if finite.numel():
            largest = max(largest, float(finite.max()))
    return largest if largest != float("-inf") else float("inf")


def mismatch(got: torch.Tensor, expected: torch.Tensor, tolerance: Any, native_error: float) -> str:
    """Why `got` is not `expected` within the re-check budget (empty when it is): for floats,
    |got - expected| <= 2 max(atol + rtol |expected|, k x native error), the correctness protocol's bound with the
    native error on both sides; other dtypes exactly. One pass on a GPU (`recheck_compare`): a re-check runs on
    every timed round, while the timing holds the device."""
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
