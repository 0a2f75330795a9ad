"""Comparing one candidate output with the reference: form (type, shape, dtype, device), poison, finiteness,
the error budget against the float64 reference, degenerate (constant) output (CHEATS.md rows 1, 2, 8, 12).

The error budget (DESIGN.md section 4; docs/verdicts.md has the data behind it). A fixed tolerance cannot judge
real workloads: an fp32 matmul with K = 4096 is off by ~1e-4 from float64 however it is summed, far beyond
atol = rtol = 1e-5, while fp16 arithmetic on a short row stays inside it. So each output element i passes when

    |out_i - ref64_i| <= max(atol + rtol |ref64_i|,  k * E)      E = max_j |native_j - ref64_j|

where `native` is the reference run in its own dtype under the task's precision policy on the same inputs, and
E is taken over the finite elements of that output. E is a per-output scale (the infinity norm of the native
error), not the native error at element i: the native error at one element is often exactly 0 by luck (a value
that rounds exactly), and an honest kernel summing in another order has no such luck there, so an elementwise
k x |native_i - ref64_i| would reject it. The normwise bound is the classic ||out - ref|| <= k ||native - ref||:
the candidate may be k times less accurate than the library, measured over the whole output. k = 16 separates
honest fp32 reorderings from fp32 math on fp16/bf16/TF32-rounded operands: over 228 problems (KernelBench L1/L2 and
tests/kernelbench, CPU), blocked and reversed orders never needed k above 0.33 and a naive one-term-at-a-time
loop needed at most 2.3 (one outlier: 36, a single-thread sum over 10^5 elements), while rounded operands needed
at least 90 wherever the tolerance alone did not already reject them. `benchmarks/error_budget.py` measures it;
docs/verdicts.md has the distributions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.judge.correctness.budget import (
    DEGENERATE_RATIO,
    ERROR_BUDGET_K,
    RESOLVABLE_ULPS,
    STALE_SHARE,
    budget_entry,
    native_scale,
)
from workbench.eval.judge.correctness.compare_chunked import CHUNK, compare_large
from workbench.eval.runner.poison import poison_mask
from workbench.eval.wire.tensors import as_list, dtype_name, is_plain, real_view, same_bits
from workbench.tasks.task import Tolerance

#: Error maps are max-pooled to at most this many cells per side.
MAP_CELLS = 64

_MAP_CAP = 1e6  # ratio cells are clamped here so the map stays finite (JSON)


@dataclass
class Comparison:
    """One candidate output against the reference. `bad[i]`: elements of output i beyond tolerance (None where
    output i is not a comparable floating tensor); `ratio`: |err| / bound of the first >= 2-D output."""

    ok: bool
    max_abs: float | None
    max_rel: float | None
    ratio: torch.Tensor | None
    flags: list[tuple[str, str]]
    bad: list[torch.Tensor | None] = field(default_factory=list)
    worst: float = 0.0
    #: The output (or an element of a tuple) is not a plain tensor of the reference's kind: no value checks.
    malformed: bool = False
    poisoned: bool = False
    #: How the errors were judged (see `ErrorBudget`); {} when no floating output was compared.
    budget: dict[str, Any] = field(default_factory=dict)


def merge_budgets(*budgets: dict[str, Any]) -> dict[str, Any]:
    """Several budget records (outputs, calls, rounds) as one: the fields of the record with the worst ratio, the
    largest native error seen, and how many records were merged. Empty records are skipped."""
    found = [b for b in budgets if b]
    if not found:
        return {}
    worst = max(found, key=lambda b: (b.get("worst_ratio") or 0.0))
    merged = {k: v for k, v in worst.items() if k not in ("outputs", "merged")}
    merged["native_error"] = max(b.get("native_error", 0.0) for b in found)
    merged["merged"] = sum(b.get("merged", 1) for b in found)
    return merged

def _form_problem(o: Any, rn: torch.Tensor, where: str) -> tuple[str, str] | None:
    """Type, materialization, shape, dtype and device of one output; None when it is a plain tensor like rn."""
    if not isinstance(o, torch.Tensor):
        return "wrong-type", f"{where}returned {type(o).__name__}, expected torch.Tensor"
    if not is_plain(o):
        return "lazy-output", f"{where}returned {type(o).__module__}.{type(o).__name__}, a torch.Tensor subclass"
    if o.device.type == "meta" or o.layout != torch.strided or o.is_nested:
        return "lazy-output", f"{where}output is not a materialized dense tensor ({o.device}, {o.layout})"
    if o.shape != rn.shape:
        return "wrong-shape", f"{where}shape {tuple(o.shape)}, expected {tuple(rn.shape)}"
    if o.dtype != rn.dtype:
        return "wrong-dtype", f"{where}dtype {dtype_name(o.dtype)}, expected {dtype_name(rn.dtype)}"
    if o.device != rn.device:
        return "wrong-device", f"{where}device {o.device}, expected {rn.device}"
    return None

def compare(out: Any, ref64: Any, ref_native: Any, tol_for: Callable[[str], Tolerance], *,
            k: float = ERROR_BUDGET_K) -> Comparison:
    """`out` against the reference: form (type, shape, dtype, device), finiteness, poison, the error budget against
    the float64 result `ref64` (module doc), degenerate (constant) output. `ref_native` is the reference in its own
    dtype under the task's precision policy: it fixes the expected form, the tolerance, the native error that scales
    the budget, and where non-finite values are expected (NaN for NaN, same-signed Inf). k=0 judges by the
    tolerance alone."""
    if not (isinstance(k, (int, float)) and k >= 0 and k == k):
        raise ValueError(f"the error budget's k must be a number >= 0, got {k!r}")
    outs, refs64, natives = as_list(out), as_list(ref64), as_list(ref_native)
    cmp = Comparison(True, None, None, None, [], [None] * len(natives))
    if isinstance(ref_native, (tuple, list)) != isinstance(out, (tuple, list)) or len(outs) != len(natives):
        cmp.ok, cmp.malformed = False, True
        cmp.flags.append(("wrong-type", f"returned {type(out).__name__} with {len(outs)} item(s); the reference "
                                        f"returns {type(ref_native).__name__} with {len(natives)}"))
        return cmp
    for i, (o, r64, rn) in enumerate(zip(outs, refs64, natives, strict=False)):
        where = f"output {i}: " if len(outs) > 1 else ""
        if not isinstance(rn, torch.Tensor):
            if isinstance(o, torch.Tensor) or not same_bits(o, rn):
                cmp.flags.append(("wrong-type" if isinstance(o, torch.Tensor) else "mismatch",
                                  f"{where}got {o!r:.80}, expected {rn!r:.80}"))
            continue
        problem = _form_problem(o, rn, where)
        if problem:
            cmp.flags.append(problem)
            cmp.malformed = True
            continue
        if not (o.is_floating_point() or o.is_complex()):
            if not torch.equal(o, rn):
                cmp.flags.append(("mismatch", f"{where}{int((o != rn).sum())} of {o.numel()} elements differ"))
            continue
        if o.numel() > CHUNK and not o.is_complex():
            compare_large(cmp, i, o, r64, rn, tol_for(dtype_name(rn.dtype)), where, float(k))
        else:
            _compare_floats(cmp, i, o, r64, rn, tol_for(dtype_name(rn.dtype)), where, float(k))
    cmp.ok = not cmp.flags
    entries = cmp.budget.pop("outputs", [])
    if entries:
        cmp.budget = merge_budgets(*entries)
        cmp.budget.pop("merged", None)
        if len(entries) > 1:
            cmp.budget["outputs"] = entries
    return cmp

def _compare_floats(cmp: Comparison, i: int, o: torch.Tensor, r64: Any, rn: torch.Tensor, tol: Tolerance,
                    where: str, k: float) -> None:
    poison = poison_mask(o)
    o64 = real_view(o.detach()).to(torch.float64)
    n64 = real_view(rn.detach()).to(torch.float64)
    e64 = real_view(r64.detach()).to(device=o.device, dtype=torch.float64) if isinstance(r64, torch.Tensor) else n64
    if poison is not None and o.is_complex():
        poison = None
    fallback = not isinstance(r64, torch.Tensor) or e64.shape != o64.shape
    if e64.shape != o64.shape:
        e64 = n64
    expect_finite = torch.isfinite(n64)
    # Where the native reference is not finite, the output must be the same non-finite value.
    same_special = (torch.isnan(o64) & torch.isnan(n64)) | (o64 == n64)
    special_bad = ~expect_finite & ~same_special
    exp = torch.where(torch.isfinite(e64), e64, n64)
    err = torch.where(expect_finite, (o64 - exp).abs(), torch.zeros_like(o64))
    err = torch.nan_to_num(err, nan=float("inf"), posinf=float("inf"))
    tol_bound = tol.atol + tol.rtol * exp.abs()
    native_error = native_scale(n64, e64)
    bound = torch.clamp_min(tol_bound, k * native_error)
    ratio = torch.where(expect_finite & (err > 0), err / bound, torch.zeros_like(err))
    ratio = torch.where(special_bad, torch.full_like(ratio, float("inf")), ratio)
    bad = ratio > 1
    cmp.bad[i] = bad
    if o64.numel():
        abs_err = float(err.max())
        rel_err = float((err / exp.abs().clamp_min(max(tol.atol, 1e-300))).max())
        cmp.max_abs = max(cmp.max_abs or 0.0, abs_err)
        cmp.max_rel = max(cmp.max_rel or 0.0, rel_err)
        cmp.worst = max(cmp.worst, float(ratio.max()))
    finite_bounds = tol_bound[expect_finite]
    cmp.budget.setdefault("outputs", []).append(budget_entry(
        tol, k, native_error, float(ratio.max()) if ratio.numel() else 0.0,
        float(finite_bounds.max()) if finite_bounds.numel() else tol.atol, fallback))
    if cmp.ratio is None and o64.dim() >= 2:
        cmp.ratio = ratio.reshape(-1, ratio.shape[-1]) if ratio.dim() > 2 else ratio
    if poison is not None and poison.shape != bad.shape:  # complex views: element sizes differ
        poison = None
    unwritten = bad & poison if poison is not None else torch.zeros_like(bad)
    n_unwritten = int(unwritten.sum())
    if n_unwritten:
        cmp.poisoned = True
        share = n_unwritten / max(o.numel(), 1)
        if share >= STALE_SHARE:
            cmp.flags.append(("stale-memory", f"{where}{n_unwritten} of {o.numel()} elements still hold the poison "
                                              "written into free memory: the output was returned without being "
                                              "computed"))
        else:
            first = tuple(int(v) for v in torch.nonzero(unwritten)[0])
            cmp.flags.append(("unwritten-output", f"{where}{n_unwritten} of {o.numel()} elements still hold the "
                                                  f"poison written into free memory, the first at index {first}"))
    nonfinite = expect_finite & ~torch.isfinite(o64) & ~unwritten
    if bool(nonfinite.any()):
        first = tuple(int(v) for v in torch.nonzero(nonfinite)[0])
        cmp.flags.append(("non-finite", f"{where}{int(nonfinite.sum())} of {o.numel()} elements are NaN/Inf where the "
                                        f"reference is finite, the first at index {first}"))
    rest = bad & ~unwritten & ~(expect_finite & ~torch.isfinite(o64))
    if bool(rest.any()):
        idx = tuple(int(v) for v in torch.nonzero(rest)[0])
        budget = f", or {k:g} x the native error {native_error:.3g}" if native_error > 0 and k > 0 else ""
        cmp.flags.append(("mismatch", f"{where}{int(rest.sum())} of {o.numel()} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}{budget}; max abs error {float(err.max()):.3g}; at index "
                                      f"{idx} got {float(o64[idx]):.6g}, expected {float(exp[idx]):.6g}"))
    degenerate = _degenerate(o64, exp, expect_finite, rn.dtype)
    if degenerate:
        cmp.flags.append(("degenerate-output", f"{where}{degenerate}"))

def _degenerate(o64: torch.Tensor, exp: torch.Tensor, finite: torch.Tensor, dtype: torch.dtype) -> str:
    """Non-empty when the output is (nearly) constant while the reference resolvably varies: a zero or constant
    result can hide inside the tolerance where the reference is small (CHEATS.md row 2)."""
    if o64.numel() < 2 or not bool(finite.all()) or not bool(torch.isfinite(o64).all()):
        return ""
    ref_std, out_std = float(exp.std()), float(o64.std())
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    resolvable = RESOLVABLE_ULPS * eps * float(exp.abs().max())
    if ref_std > 0.0 and ref_std > resolvable and out_std <= DEGENERATE_RATIO * ref_std:
        kind = "zero" if float(o64.abs().max()) == 0.0 else "constant"
        return (f"the output is {kind} (std {out_std:.3g}, first value {float(o64.reshape(-1)[0]):.6g}) while the "
                f"reference varies (std {ref_std:.3g})")
    return ""

def constant_passes(ref64: list[Any], natives: list[Any], tol_for: Callable[[str], Tolerance],
                    asked: list[bool] | None = None) -> list[bool | None]:
    """Per output: would a constant (the midrange, or zero) pass the tolerance? None for scalars and non-floats, and
    for outputs `asked` leaves out (False at their index)."""
    verdicts: list[bool | None] = []
    for k, (r64, rn) in enumerate(zip(ref64, natives, strict=False)):
        if asked is not None and k < len(asked) and not asked[k]:
            verdicts.append(None)
            continue
        if not (isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() > 1):
            verdicts.append(None)
            continue
        tol = tol_for(dtype_name(rn.dtype))
        src = (r64 if isinstance(r64, torch.Tensor) else rn).detach().reshape(-1)
        lo, hi, seen = float("inf"), float("-inf"), False
        for part in _finite_parts(src):  # slices: a KernelBench output can be a billion elements
            lo, hi, seen = min(lo, float(part.min())), max(hi, float(part.max())), True
        if not seen:
            verdicts.append(None)
            continue
        mid = 0.5 * (lo + hi)
        near_mid = near_zero = True
        for part in _finite_parts(src):
            bound = tol.atol + tol.rtol * part.abs()
            near_mid = near_mid and bool(((part - mid).abs() <= bound).all())
            near_zero = near_zero and bool((part.abs() <= bound).all())
        verdicts.append(near_mid or near_zero)
    return verdicts


def _finite_parts(flat: torch.Tensor):
    """The finite elements of a flat tensor as float64, a slice of CHUNK at a time (empty slices skipped)."""
    for s in range(0, flat.numel(), CHUNK):
        part = flat[s:s + CHUNK].to(torch.float64)
        part = part[torch.isfinite(part)]
        if part.numel():
            yield part

def downsample(ratio: torch.Tensor, limit: int = MAP_CELLS) -> list[list[float]]:
    r = torch.nan_to_num(ratio.detach().to(torch.float32).cpu(), nan=_MAP_CAP, posinf=_MAP_CAP).clamp(0, _MAP_CAP)
    h, w = r.shape
    if not h or not w:
        return []
    kh, kw = -(-h // limit), -(-w // limit)
    if kh > 1 or kw > 1:
        r = torch.nn.functional.max_pool2d(r[None, None], (kh, kw), ceil_mode=True)[0, 0]
    return [[float(f"{v:.4g}") for v in row] for row in r.tolist()]
