"""One candidate output against the reference: form, poison, finiteness, the error budget, degenerate output
(docs/anti-cheating.md rows 1, 2, 8, 12; the budget in docs/verdicts.md: |out_i - ref64_i| <= max(atol + rtol
|ref64_i|, k E), E = max_j |native_j - ref64_j|, k = 16). Judged `CHUNK` elements at a time, a large output on a GPU
in one pass by `compare_fused`, which must agree."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.eval.judge.correctness import compare_fused as fused
from workbench.eval.runner.poison import poison_mask
from workbench.eval.wire.tensors import as_list, dtype_name, is_plain, real_view, same_bits
from workbench.tasks.task import Tolerance

#: An output with at least this share of its elements unwritten (or stale) was returned without being computed.
STALE_SHARE = 0.5
#: degenerate-output: the output's spread is below this fraction of the reference's.
DEGENERATE_RATIO = 1e-2
#: The reference's variation must exceed this many units in the last place of its dtype to be told apart.
RESOLVABLE_ULPS = 4
#: The error budget's k (module doc; docs/verdicts.md).
ERROR_BUDGET_K = 16.0
#: Elements per slice: about 2 GB of float64 temporaries at a time.
CHUNK = 1 << 25
#: "auto": outputs over a slice on a GPU in one pass; "always": all (the interpreter too: tests); "never".
FUSED = "auto"
#: Error maps are max-pooled to at most this many cells per side.
MAP_CELLS = 64
_MAP_CAP = 1e6  # ratio cells are clamped here so the map stays finite (JSON)


@dataclass
class Comparison:
    """One output against the reference: `bad[i]` its elements beyond the bound (None where not a floating
    tensor), `ratio` |err| / bound of the first >= 2-D output, `budget` how errors were judged."""

    ok: bool
    max_abs: float | None
    max_rel: float | None
    ratio: torch.Tensor | None
    flags: list[tuple[str, str]]
    bad: list[torch.Tensor | None] = field(default_factory=list)
    worst: float = 0.0
    malformed: bool = False  # not a plain tensor of the reference's kind: no value checks
    poisoned: bool = False
    budget: dict[str, Any] = field(default_factory=dict)


def native_scale(n64: torch.Tensor, e64: torch.Tensor) -> float:
    """E: the largest |native - ref64| where both are finite (0.0 when none are, or native is ref64)."""
    if n64 is e64 or not n64.numel():
        return 0.0
    finite = torch.isfinite(n64) & torch.isfinite(e64)
    return float((n64 - e64).abs()[finite].max()) if bool(finite.any()) else 0.0


def budget_entry(tol: Tolerance, k: float, native_error: float, worst: float, max_tol_bound: float,
                 fallback: bool) -> dict[str, Any]:
    """One output's budget record; `bound` names the term that set the pass bound: "tolerance", "k x native" or
    "both" (the tolerance on large elements, k E on small ones)."""
    native_bound = k * native_error
    kind = "tolerance" if native_bound <= tol.atol else "k x native" if native_bound >= max_tol_bound else "both"
    entry = {"tolerance": {"atol": tol.atol, "rtol": tol.rtol}, "k": k, "native_error": native_error,
             "native_bound": native_bound, "bound": kind, "worst_ratio": worst, "norm": "max-abs per output"}
    if fallback:
        entry["note"] = "no float64 reference: the native result was the reference, so only the tolerance applies"
    return entry


def merge_budgets(*budgets: dict[str, Any]) -> dict[str, Any]:
    """Several budget records as one: the one with the worst ratio, as it is, and how many were merged."""
    found = [b for b in budgets if b]
    if not found:
        return {}
    worst = max(found, key=lambda b: (b.get("worst_ratio") or 0.0))
    merged = {k: v for k, v in worst.items() if k not in ("outputs", "merged")}
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
    return ("wrong-device", f"{where}device {o.device}, expected {rn.device}") if o.device != rn.device else None


def compare(out: Any, ref64: Any, ref_native: Any, tol_for: Callable[[str], Tolerance], *,
            k: float = ERROR_BUDGET_K) -> Comparison:
    """`out` against the float64 result `ref64`; `ref_native` fixes the expected form, the tolerance, the native
    error and where non-finite values are expected. k=0 judges by the tolerance alone."""
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
        _compare_floats(cmp, i, o, r64, rn, tol_for(dtype_name(rn.dtype)), where, float(k))
    cmp.ok = not cmp.flags
    entries = cmp.budget.pop("outputs", [])
    if entries:
        cmp.budget = merge_budgets(*entries)
        cmp.budget.pop("merged", None)
        if len(entries) > 1:
            cmp.budget["outputs"] = entries
    return cmp


class _Tally:
    """What the slices of one output add up to: counts and first (flat index, value, expected) per kind of bad
    element, the largest errors and bound, and sums for both sides' spread."""

    def __init__(self, n: int, device: torch.device, atol: float):
        self.bad = torch.empty(n, dtype=torch.bool, device=device)
        self.counts = {"unwritten": 0, "nonfinite": 0, "rest": 0}
        self.first: dict[str, tuple[int, float, float] | None] = {"unwritten": None, "nonfinite": None, "rest": None}
        self.max_abs = self.max_rel = self.worst = 0.0
        self.max_tol_bound = atol
        self.sums = [0.0, 0.0, 0.0, 0.0]  # sum o, sum o^2, sum e, sum e^2
        self.all_finite, self.max_exp, self.max_o = True, 0.0, 0.0
        self.ratio: torch.Tensor | None = None

    @classmethod
    def from_fused(cls, got: dict[str, Any], atol: float) -> _Tally:
        """The tally the one-pass kernels made; first indices are filled later."""
        tally = cls(0, got["bad"].device, atol)
        tally.bad = got["bad"].reshape(-1)
        tally.counts = dict(got["counts"])
        tally.max_abs, tally.max_rel, tally.worst = got["max_abs"], got["max_rel"], got["worst"]
        tally.max_tol_bound = max(atol, got["max_tol_bound"])
        tally.sums = [got["sum_o"], got["sum_o2"], got["sum_e"], got["sum_e2"]]
        tally.all_finite, tally.max_exp, tally.max_o = got["all_finite"], got["max_exp"], got["max_o"]
        return tally

    def add(self, s: int, o64: torch.Tensor, n64: torch.Tensor, exp: torch.Tensor, raw: torch.Tensor, tol: Tolerance,
            floor: float) -> torch.Tensor:
        """Judge the slice at flat index `s` (float64 `o64`, `n64`, `exp`; `raw` the output's own bits for the
        poison; `floor` = k E); its |err| / bound."""
        expect_finite = torch.isfinite(n64)
        same_special = (torch.isnan(o64) & torch.isnan(n64)) | (o64 == n64)
        err = torch.nan_to_num(torch.where(expect_finite, (o64 - exp).abs(), torch.zeros_like(o64)),
                               nan=float("inf"), posinf=float("inf"))
        tol_bound = tol.atol + tol.rtol * exp.abs()
        if bool(expect_finite.any()):
            self.max_tol_bound = max(self.max_tol_bound, float(tol_bound[expect_finite].max()))
        ratio = torch.where(expect_finite & (err > 0), err / torch.clamp_min(tol_bound, floor), torch.zeros_like(err))
        ratio = torch.where(~expect_finite & ~same_special, torch.full_like(ratio, float("inf")), ratio)
        bad = ratio > 1
        self.bad[s:s + bad.numel()] = bad
        if err.numel():
            self.max_abs = max(self.max_abs, float(err.max()))
            rel = err / exp.abs().clamp_min(max(tol.atol, 1e-300))
            self.max_rel = max(self.max_rel, float(torch.where(torch.isnan(rel), 0.0, rel).max()))
            self.worst = max(self.worst, float(ratio.max()))
        poison = poison_mask(raw)  # not used where its shape differs: complex views, whose element sizes differ
        unwritten = bad & poison if poison is not None and poison.shape == bad.shape else torch.zeros_like(bad)
        nonfinite = expect_finite & ~torch.isfinite(o64) & ~unwritten
        rest = bad & ~unwritten & ~(expect_finite & ~torch.isfinite(o64))
        for name, mask in (("unwritten", unwritten), ("nonfinite", nonfinite), ("rest", rest)):
            c = int(mask.sum())
            if c:
                self.counts[name] += c
                if self.first[name] is None:
                    j = int(torch.nonzero(mask)[0])
                    self.first[name] = (s + j, float(o64[j]), float(exp[j]))
        self.all_finite = self.all_finite and bool(expect_finite.all()) and bool(torch.isfinite(o64).all())
        if self.all_finite and o64.numel():
            for j, total in enumerate((o64.sum(), (o64 * o64).sum(), exp.sum(), (exp * exp).sum())):
                self.sums[j] += float(total)
            self.max_exp = max(self.max_exp, float(exp.abs().max()))
            self.max_o = max(self.max_o, float(o64.abs().max()))
        return ratio


def _compare_floats(cmp: Comparison, i: int, o: torch.Tensor, r64: Any, rn: torch.Tensor, tol: Tolerance,
                    where: str, k: float) -> None:
    """One floating (or complex) output under the error budget, a slice at a time or in one pass."""
    flat_o, flat_n = real_view(o.detach()).reshape(-1), real_view(rn.detach()).reshape(-1)
    fallback = not isinstance(r64, torch.Tensor) or tuple(r64.shape) != tuple(o.shape)
    flat_e = flat_n if fallback else real_view(r64.detach()).reshape(-1)
    n, dev = flat_o.numel(), o.device
    spans = [(s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)] or [(0, 0)]

    def piece(t: torch.Tensor, s: int, e: int) -> torch.Tensor:
        return t[s:e].to(device=dev, dtype=torch.float64)

    def judge_slice(t: _Tally, s: int, e: int, floor: float, at: int) -> torch.Tensor:
        n64, e64 = piece(flat_n, s, e), piece(flat_e, s, e)
        exp = torch.where(torch.isfinite(e64), e64, n64)
        del e64
        return t.add(at, piece(flat_o, s, e), n64, exp, flat_o[s:e], tol, floor)

    def sliced() -> tuple[_Tally, float]:
        error = 0.0 if fallback else max(native_scale(piece(flat_n, s, e), piece(flat_e, s, e)) for s, e in spans)
        t = _Tally(n, dev, tol.atol)
        for s, e in spans:
            ratio = judge_slice(t, s, e, k * error, s)
            if len(spans) == 1:
                t.ratio = ratio
        return t, error

    tally: _Tally | None = None
    if (n > CHUNK or FUSED == "always") and not o.is_complex() and FUSED != "never" and \
            fused.usable(flat_o, flat_n, flat_e, interpreter=FUSED == "always"):
        tally, native_error = _one_pass(flat_o, flat_n, flat_e, fallback, tol, k, judge_slice, dev)
    if tally is None:  # no one pass, or the two paths disagree on an element: the slices' word stands
        tally, native_error = sliced()
    cmp.bad[i] = tally.bad.view(real_view(o).shape)
    if tally.bad.numel():
        cmp.max_abs = max(cmp.max_abs or 0.0, tally.max_abs)
        cmp.max_rel = max(cmp.max_rel or 0.0, tally.max_rel)
        cmp.worst = max(cmp.worst, tally.worst)
    cmp.budget.setdefault("outputs", []).append(budget_entry(tol, k, native_error, tally.worst, tally.max_tol_bound,
                                                             fallback))
    if cmp.ratio is None and tally.ratio is not None and o.dim() >= 2:
        ratio = tally.ratio.view(real_view(o).shape)
        cmp.ratio = ratio.reshape(-1, ratio.shape[-1]) if ratio.dim() > 2 else ratio
    _flag(cmp, tally, real_view(o).shape, rn.dtype, tol, where, k, native_error)


def _one_pass(flat_o: torch.Tensor, flat_n: torch.Tensor, flat_e: torch.Tensor, fallback: bool, tol: Tolerance,
              k: float, judge_slice: Callable[..., Any], dev: torch.device) -> tuple[_Tally | None, float]:
    """The one-pass tally, each kind's first bad element found by torch on its block; (None, E) if they disagree."""
    native_error = 0.0 if fallback else fused.native_error(flat_n, flat_e)
    got = fused.tally(flat_o, flat_n, flat_e, tol.atol, tol.rtol, k * native_error)
    tally = _Tally.from_fused(got, tol.atol)
    n = flat_o.numel()
    for name, block in got["first_block"].items():
        s, e = block * fused.BLOCK, min((block + 1) * fused.BLOCK, n)
        probe = _Tally(e - s, dev, tol.atol)
        judge_slice(probe, s, e, k * native_error, 0)
        if probe.first[name] is not None:
            j, value, expected = probe.first[name]
            tally.first[name] = (s + j, value, expected)
    if any(tally.counts[name] and tally.first[name] is None for name in tally.counts):
        return None, native_error
    return tally, native_error


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))


def _flag(cmp: Comparison, tally: _Tally, shape: torch.Size, dtype: torch.dtype, tol: Tolerance, where: str,
          k: float, native_error: float) -> None:
    counts, first, n = tally.counts, tally.first, tally.bad.numel()
    if counts["unwritten"]:
        cmp.poisoned = True
        if counts["unwritten"] / n >= STALE_SHARE:
            cmp.flags.append(("stale-memory", f"{where}{counts['unwritten']} of {n} elements still hold the poison "
                                              "written into free memory: the output was returned without being "
                                              "computed"))
        else:
            cmp.flags.append(("unwritten-output", f"{where}{counts['unwritten']} of {n} elements still hold the "
                                                  f"poison written into free memory, the first at index "
                                                  f"{_index(first['unwritten'][0], shape)}"))
    if counts["nonfinite"]:
        cmp.flags.append(("non-finite", f"{where}{counts['nonfinite']} of {n} elements are NaN/Inf where the "
                                        f"reference is finite, the first at index "
                                        f"{_index(first['nonfinite'][0], shape)}"))
    if counts["rest"]:
        flat, got, expected = first["rest"]
        budget = f", or {k:g} x the native error {native_error:.3g} = {k * native_error:.3g}" \
            if native_error > 0 and k > 0 else ""
        cmp.flags.append(("mismatch", f"{where}{counts['rest']} of {n} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}{budget}; max abs error {tally.max_abs:.3g}; at index "
                                      f"{_index(flat, shape)} got {got:.6g}, expected {expected:.6g}"))
    degenerate = _degenerate(tally, n, dtype)
    if degenerate:
        cmp.flags.append(("degenerate-output", f"{where}{degenerate}"))


def _degenerate(tally: _Tally, n: int, dtype: torch.dtype) -> str:
    """Why the output is (nearly) constant while the reference resolvably varies ("" when not)."""
    if not tally.all_finite or n < 2:
        return ""
    sums = tally.sums
    o_std = max(0.0, sums[1] / n - (sums[0] / n) ** 2) ** 0.5
    e_std = max(0.0, sums[3] / n - (sums[2] / n) ** 2) ** 0.5
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    if e_std > 0.0 and e_std > RESOLVABLE_ULPS * eps * tally.max_exp and o_std <= DEGENERATE_RATIO * e_std:
        kind = "zero" if tally.max_o == 0.0 else "constant"
        return f"the output is {kind} (std {o_std:.3g}) while the reference varies (std {e_std:.3g})"
    return ""


def constant_passes(ref64: list[Any], natives: list[Any], tol_for: Callable[[str], Tolerance],
                    asked: list[bool] | None = None) -> list[bool | None]:
    """Per output: does a constant (midrange or zero) pass the tolerance? None: scalars, non-floats, not `asked`."""
    verdicts: list[bool | None] = []
    for j, (r64, rn) in enumerate(zip(ref64, natives, strict=False)):
        left_out = asked is not None and j < len(asked) and not asked[j]
        if left_out or not (isinstance(rn, torch.Tensor) and rn.is_floating_point() and rn.numel() > 1):
            verdicts.append(None)
            continue
        tol = tol_for(dtype_name(rn.dtype))
        src = (r64 if isinstance(r64, torch.Tensor) else rn).detach().reshape(-1)
        lo, hi, seen = float("inf"), float("-inf"), False
        for part in _finite_parts(src):
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


def _finite_parts(flat: torch.Tensor) -> Iterator[torch.Tensor]:
    """The finite elements of a flat tensor as float64, CHUNK at a time."""
    for s in range(0, flat.numel(), CHUNK):
        part = flat[s:s + CHUNK].to(torch.float64)
        part = part[torch.isfinite(part)]
        if part.numel():
            yield part


def error_map(ratio: torch.Tensor, limit: int = MAP_CELLS) -> dict[str, Any]:
    """A 2-D |err| / bound map: `cells` max-pooled to at most `limit` a side, the extent (`rows`, `cols`), `pool`."""
    r = torch.nan_to_num(ratio.detach().to(torch.float32).cpu(), nan=_MAP_CAP, posinf=_MAP_CAP).clamp(0, _MAP_CAP)
    h, w = r.shape
    if not h or not w:
        return {"cells": [], "rows": h, "cols": w, "pool": [1, 1]}
    kh, kw = -(-h // limit), -(-w // limit)
    if kh > 1 or kw > 1:
        r = torch.nn.functional.max_pool2d(r[None, None], (kh, kw), ceil_mode=True)[0, 0]
    return {"cells": [[float(f"{v:.4g}") for v in row] for row in r.tolist()], "rows": h, "cols": w, "pool": [kh, kw]}
