"""The comparison of one large floating output, a slice at a time (DESIGN.md section 4, scale).

`compare._compare_floats` holds about eight float64 copies of an output at once; for a KernelBench L1 output of a
billion elements that is 64 GB, more than a GPU has left beside the protocol's inputs and references. This path
gives the same verdicts in slices of `CHUNK` elements: the native error E (the error budget's scale) is the maximum
over all slices first, then every slice is judged against max(tolerance, k x E), and the counts, first indices and
extreme errors are gathered across slices. The output's spread for `degenerate-output` comes from running sums.
Only the error heatmap is left out (a map of a billion cells says nothing a count does not).
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.eval.judge.correctness import compare_fused as fused
from workbench.eval.judge.correctness.budget import (
    DEGENERATE_RATIO,
    RESOLVABLE_ULPS,
    STALE_SHARE,
    budget_entry,
    native_scale,
)
from workbench.tasks.task import Tolerance

#: Elements per slice: about 2 GB of float64 temporaries at a time.
CHUNK = 1 << 25
#: "auto": judge a large output on a GPU in one pass with the judge's own kernels (`output_compare_fused`), elsewhere
#: slice by slice with torch; "always": the kernels under Triton's interpreter too (tests); "never": torch only.
FUSED = "auto"


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


class _Tally:
    """What the slices of one output add up to: counts and first indices per kind of bad element, the largest
    errors, the tightest tolerance bound, and running sums for the output's and the reference's spread."""

    @classmethod
    def from_fused(cls, got: dict[str, Any], atol: float) -> _Tally:
        """The tally the one-pass kernels made (`output_compare_fused.tally`); first indices are filled later."""
        tally = cls.__new__(cls)
        tally.bad = got["bad"].reshape(-1)
        tally.counts = dict(got["counts"])
        tally.first = {"unwritten": None, "nonfinite": None, "rest": None}
        tally.max_abs, tally.max_rel, tally.worst = got["max_abs"], got["max_rel"], got["worst"]
        tally.max_tol_bound = max(atol, got["max_tol_bound"])
        tally.sums = [got["sum_o"], got["sum_o2"], got["sum_e"], got["sum_e2"]]
        tally.all_finite, tally.max_exp, tally.max_o = got["all_finite"], got["max_exp"], got["max_o"]
        return tally

    def __init__(self, n: int, device: torch.device, atol: float):
        self.bad = torch.empty(n, dtype=torch.bool, device=device)
        self.counts = {"unwritten": 0, "nonfinite": 0, "rest": 0}
        self.first: dict[str, tuple[int, float, float] | None] = {"unwritten": None, "nonfinite": None, "rest": None}
        self.max_abs = self.max_rel = self.worst = 0.0
        self.max_tol_bound = atol
        self.sums = [0.0, 0.0, 0.0, 0.0]  # sum o, sum o^2, sum e, sum e^2
        self.all_finite, self.max_exp, self.max_o = True, 0.0, 0.0

    def add(self, s: int, o64: torch.Tensor, n64: torch.Tensor, exp: torch.Tensor, raw: torch.Tensor, tol: Tolerance,
            floor: float) -> None:
        """Judge the slice starting at flat index `s`: output `o64`, native reference `n64`, expected values `exp`
        (the float64 reference where finite, else the native one; all float64), `raw` the output's own slice (for
        the poison check), `floor` = k x the native error."""
        from workbench.eval.runner.poison import poison_mask

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
        self.max_abs = max(self.max_abs, float(err.max()))
        rel = err / exp.abs().clamp_min(max(tol.atol, 1e-300))
        # Where the expected value is NaN (both references NaN) the relative error says nothing: left out, not
        # allowed to turn the whole slice's maximum into NaN.
        self.max_rel = max(self.max_rel, float(torch.where(torch.isnan(rel), 0.0, rel).max()))
        self.worst = max(self.worst, float(ratio.max()))
        poison = poison_mask(raw)
        unwritten = bad & poison if poison is not None else torch.zeros_like(bad)
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
        if self.all_finite:
            self.sums[0] += float(o64.sum())
            self.sums[1] += float((o64 * o64).sum())
            self.sums[2] += float(exp.sum())
            self.sums[3] += float((exp * exp).sum())
            self.max_exp = max(self.max_exp, float(exp.abs().max()))
            self.max_o = max(self.max_o, float(o64.abs().max()))


def compare_large(cmp: Any, i: int, o: torch.Tensor, r64: Any, rn: torch.Tensor, tol: Tolerance, where: str,
                  k: float) -> None:
    """`compare._compare_floats` for an output too large to judge in one piece (same flags, same messages)."""
    n = o.numel()
    of, nf = o.detach().reshape(-1), rn.detach().reshape(-1)
    fallback = not isinstance(r64, torch.Tensor) or tuple(r64.shape) != tuple(o.shape)
    ef = nf if fallback else r64.detach().reshape(-1)
    dev = o.device
    spans = [(s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)]

    def piece(t: torch.Tensor, s: int, e: int) -> torch.Tensor:
        return t[s:e].to(device=dev, dtype=torch.float64)

    def judge_slice(t: _Tally, s: int, e: int, floor: float, at: int) -> None:
        """Elements [s, e) into the tally `t`, at its index `at`."""
        n64, e64 = piece(nf, s, e), piece(ef, s, e)
        exp = torch.where(torch.isfinite(e64), e64, n64)
        del e64  # one float64 slice fewer held while the slice is judged
        t.add(at, piece(of, s, e), n64, exp, of[s:e], tol, floor)

    def sliced() -> tuple[_Tally, float]:
        error = 0.0 if fallback else max(native_scale(piece(nf, s, e), piece(ef, s, e)) for s, e in spans)
        t = _Tally(n, dev, tol.atol)
        for s, e in spans:
            judge_slice(t, s, e, k * error, s)
        return t, error

    if FUSED != "never" and fused.usable(of, nf, ef, interpreter=FUSED == "always"):
        native_error = 0.0 if fallback else fused.native_error(nf, ef)
        got = fused.tally(of, nf, ef, tol.atol, tol.rtol, k * native_error)
        tally = _Tally.from_fused(got, tol.atol)
        for name, block in got["first_block"].items():
            # A message names the first element of each kind: the first block that counted one, judged again.
            s, e = block * fused.BLOCK, min((block + 1) * fused.BLOCK, n)
            probe = _Tally(e - s, dev, tol.atol)
            judge_slice(probe, s, e, k * native_error, 0)
            if probe.first[name] is not None:
                j, value, expected = probe.first[name]
                tally.first[name] = (s + j, value, expected)
        if any(tally.counts[name] and tally.first[name] is None for name in tally.counts):
            tally, native_error = sliced()  # the two paths disagree on an element: the slices' word stands
    else:
        tally, native_error = sliced()
    cmp.bad[i] = tally.bad.view(o.shape)
    cmp.max_abs = max(cmp.max_abs or 0.0, tally.max_abs)
    cmp.max_rel = max(cmp.max_rel or 0.0, tally.max_rel)
    cmp.worst = max(cmp.worst, tally.worst)
    cmp.budget.setdefault("outputs", []).append(budget_entry(tol, k, native_error, tally.worst, tally.max_tol_bound,
                                                             fallback))
    _flag(cmp, tally, o.shape, rn.dtype, tol, where, k, native_error)


def _flag(cmp: Any, tally: _Tally, shape: torch.Size, dtype: torch.dtype, tol: Tolerance, where: str, k: float,
          native_error: float) -> None:
    """The flags of one sliced output, worded as the whole-tensor comparison words them."""
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
        budget = f", or {k:g} x the native error {native_error:.3g}" if native_error > 0 and k > 0 else ""
        cmp.flags.append(("mismatch", f"{where}{counts['rest']} of {n} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}{budget}; max abs error {tally.max_abs:.3g}; at index "
                                      f"{_index(flat, shape)} got {got:.6g}, expected {expected:.6g}"))
    sums = tally.sums
    if tally.all_finite and n > 1:
        o_std = max(0.0, sums[1] / n - (sums[0] / n) ** 2) ** 0.5
        e_std = max(0.0, sums[3] / n - (sums[2] / n) ** 2) ** 0.5
        eps = torch.finfo(dtype).eps
        if e_std > 0.0 and e_std > RESOLVABLE_ULPS * eps * tally.max_exp and o_std <= DEGENERATE_RATIO * e_std:
            kind = "zero" if tally.max_o == 0.0 else "constant"
            cmp.flags.append(("degenerate-output", f"{where}the output is {kind} (std {o_std:.3g}) while the "
                                                   f"reference varies (std {e_std:.3g})"))
