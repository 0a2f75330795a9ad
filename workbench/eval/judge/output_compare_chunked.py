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

from workbench.tasks.task import Tolerance

#: Elements per slice: about 2 GB of float64 temporaries at a time.
CHUNK = 1 << 25


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def compare_large(cmp: Any, i: int, o: torch.Tensor, r64: Any, rn: torch.Tensor, tol: Tolerance, where: str,
                  k: float) -> None:
    """`compare._compare_floats` for an output too large to judge in one piece (same flags, same messages)."""
    from workbench.eval.judge.output_compare import (
        DEGENERATE_RATIO,
        RESOLVABLE_ULPS,
        STALE_SHARE,
        _budget_entry,
        native_scale,
    )
    from workbench.eval.runner.poison import poison_mask

    n = o.numel()
    of, nf = o.detach().reshape(-1), rn.detach().reshape(-1)
    fallback = not isinstance(r64, torch.Tensor) or tuple(r64.shape) != tuple(o.shape)
    ef = nf if fallback else r64.detach().reshape(-1)
    dev = o.device
    spans = [(s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)]

    def piece(t: torch.Tensor, s: int, e: int) -> torch.Tensor:
        return t[s:e].to(device=dev, dtype=torch.float64)

    native_error = 0.0 if fallback else max(native_scale(piece(nf, s, e), piece(ef, s, e)) for s, e in spans)
    bad_all = torch.empty(n, dtype=torch.bool, device=dev)
    counts = {"unwritten": 0, "nonfinite": 0, "rest": 0}
    first: dict[str, tuple[int, float, float] | None] = {"unwritten": None, "nonfinite": None, "rest": None}
    max_abs = max_rel = worst = 0.0
    max_tol_bound = tol.atol
    sums = [0.0, 0.0, 0.0, 0.0]  # sum o, sum o^2, sum e, sum e^2
    all_finite, max_exp, max_o = True, 0.0, 0.0
    for s, e in spans:
        o64, n64, e64 = piece(of, s, e), piece(nf, s, e), piece(ef, s, e)
        expect_finite = torch.isfinite(n64)
        same_special = (torch.isnan(o64) & torch.isnan(n64)) | (o64 == n64)
        exp = torch.where(torch.isfinite(e64), e64, n64)
        del e64
        err = torch.nan_to_num(torch.where(expect_finite, (o64 - exp).abs(), torch.zeros_like(o64)),
                               nan=float("inf"), posinf=float("inf"))
        tol_bound = tol.atol + tol.rtol * exp.abs()
        if bool(expect_finite.any()):
            max_tol_bound = max(max_tol_bound, float(tol_bound[expect_finite].max()))
        ratio = torch.where(expect_finite & (err > 0), err / torch.clamp_min(tol_bound, k * native_error),
                            torch.zeros_like(err))
        ratio = torch.where(~expect_finite & ~same_special, torch.full_like(ratio, float("inf")), ratio)
        bad = ratio > 1
        bad_all[s:e] = bad
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / exp.abs().clamp_min(max(tol.atol, 1e-300))).max()))
        worst = max(worst, float(ratio.max()))
        poison = poison_mask(of[s:e])
        unwritten = bad & poison if poison is not None else torch.zeros_like(bad)
        nonfinite = expect_finite & ~torch.isfinite(o64) & ~unwritten
        rest = bad & ~unwritten & ~(expect_finite & ~torch.isfinite(o64))
        for name, mask in (("unwritten", unwritten), ("nonfinite", nonfinite), ("rest", rest)):
            c = int(mask.sum())
            if c:
                counts[name] += c
                if first[name] is None:
                    j = int(torch.nonzero(mask)[0])
                    first[name] = (s + j, float(o64[j]), float(exp[j]))
        all_finite = all_finite and bool(expect_finite.all()) and bool(torch.isfinite(o64).all())
        if all_finite:
            sums[0] += float(o64.sum())
            sums[1] += float((o64 * o64).sum())
            sums[2] += float(exp.sum())
            sums[3] += float((exp * exp).sum())
            max_exp = max(max_exp, float(exp.abs().max()))
            max_o = max(max_o, float(o64.abs().max()))
    cmp.bad[i] = bad_all.view(o.shape)
    cmp.max_abs = max(cmp.max_abs or 0.0, max_abs)
    cmp.max_rel = max(cmp.max_rel or 0.0, max_rel)
    cmp.worst = max(cmp.worst, worst)
    cmp.budget.setdefault("outputs", []).append(_budget_entry(tol, k, native_error, worst, max_tol_bound, fallback))
    if counts["unwritten"]:
        cmp.poisoned = True
        if counts["unwritten"] / n >= STALE_SHARE:
            cmp.flags.append(("stale-memory", f"{where}{counts['unwritten']} of {n} elements still hold the poison "
                                              "written into free memory: the output was returned without being "
                                              "computed"))
        else:
            cmp.flags.append(("unwritten-output", f"{where}{counts['unwritten']} of {n} elements still hold the "
                                                  f"poison written into free memory, the first at index "
                                                  f"{_index(first['unwritten'][0], o.shape)}"))
    if counts["nonfinite"]:
        cmp.flags.append(("non-finite", f"{where}{counts['nonfinite']} of {n} elements are NaN/Inf where the "
                                        f"reference is finite, the first at index "
                                        f"{_index(first['nonfinite'][0], o.shape)}"))
    if counts["rest"]:
        flat, got, expected = first["rest"]
        budget = f", or {k:g} x the native error {native_error:.3g}" if native_error > 0 and k > 0 else ""
        cmp.flags.append(("mismatch", f"{where}{counts['rest']} of {n} elements beyond atol={tol.atol:g}, "
                                      f"rtol={tol.rtol:g}{budget}; max abs error {max_abs:.3g}; at index "
                                      f"{_index(flat, o.shape)} got {got:.6g}, expected {expected:.6g}"))
    if all_finite and n > 1:
        o_std = max(0.0, sums[1] / n - (sums[0] / n) ** 2) ** 0.5
        e_std = max(0.0, sums[3] / n - (sums[2] / n) ** 2) ** 0.5
        eps = torch.finfo(rn.dtype).eps
        if e_std > 0.0 and e_std > RESOLVABLE_ULPS * eps * max_exp and o_std <= DEGENERATE_RATIO * e_std:
            kind = "zero" if max_o == 0.0 else "constant"
            cmp.flags.append(("degenerate-output", f"{where}the output is {kind} (std {o_std:.3g}) while the "
                                                   f"reference varies (std {e_std:.3g})"))
