"""One large floating output judged in one pass on the GPU (docs/verdicts.md, scale): Triton kernels for the budget's
E, `compare._Tally.add`'s per-block counts and extremes, two calls' difference and the timed re-check. The first bad
element of each kind is found by judging its block again with torch, so the messages are the slices' word for word."""

from __future__ import annotations

import os
import threading
from typing import Any

import torch
import triton
import triton.language as tl

from workbench.eval.judge.device_lock import DeviceLock
from workbench.eval.judge.reference.compiled import beside_the_judge
from workbench.eval.runner.poison import poison_words
from workbench.eval.wire.tensors import int_view, real_view

#: Elements per program (2.1G elements -> 512K blocks of partials).
BLOCK = 4096
#: Per-block partials of the tally, in this order.
F64_FIELDS = ("max_abs", "max_rel", "worst", "max_tol_bound", "sum_o", "sum_o2", "sum_e", "sum_e2", "max_exp", "max_o")
I32_FIELDS = ("unwritten", "nonfinite", "rest", "all_finite")


@triton.jit
def _finite(x):
    return (x - x) == 0.0  # inf - inf and NaN - NaN are NaN


@triton.jit
def _block(N, BLOCK_SIZE: tl.constexpr):
    """This program's index, offsets (64-bit: outputs pass 2^31 elements) and mask."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    return pid, offs, offs < N


@triton.jit
def _load64(ptr, offs, m):
    return tl.load(ptr + offs, mask=m, other=0.0).to(tl.float64)


@triton.jit
def _native_error_kernel(n_ptr, e_ptr, part_ptr, N, BLOCK_SIZE: tl.constexpr):
    pid, offs, m = _block(N, BLOCK_SIZE)
    n, e = _load64(n_ptr, offs, m), _load64(e_ptr, offs, m)
    both = m & _finite(n) & _finite(e)
    d = tl.where(both, tl.abs(n - e), 0.0)
    tl.store(part_ptr + pid, tl.max(d, axis=0))


@triton.jit
def _tally_kernel(o_ptr, n_ptr, e_ptr, bits_ptr, bad_ptr, f_ptr, i_ptr, k_ptr, N, p1, p2,
                  HAS_POISON: tl.constexpr, NF: tl.constexpr, NI: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # The bounds come in float64 from memory: a float argument would be passed as float32.
    atol, rtol, floor, rel_floor = tl.load(k_ptr), tl.load(k_ptr + 1), tl.load(k_ptr + 2), tl.load(k_ptr + 3)
    pid, offs, m = _block(N, BLOCK_SIZE)
    o, n, e = _load64(o_ptr, offs, m), _load64(n_ptr, offs, m), _load64(e_ptr, offs, m)
    inf = float("inf")
    expect_finite, o_finite = _finite(n), _finite(o)
    exp = tl.where(_finite(e), e, n)
    same_special = ((o != o) & (n != n)) | (o == n)
    d = tl.abs(o - exp)
    err = tl.where(expect_finite, tl.where(d == d, d, inf), 0.0)
    tol_bound = atol + rtol * tl.abs(exp)
    ratio = tl.where(expect_finite & (err > 0), err / tl.maximum(tol_bound, floor), 0.0)
    ratio = tl.where(~expect_finite & ~same_special, inf, ratio)
    bad = (ratio > 1.0) & m
    tl.store(bad_ptr + offs, bad.to(tl.int8), mask=m)
    if HAS_POISON:
        bits = tl.load(bits_ptr + offs, mask=m, other=0)
        poison = (bits == p1) | (bits == p2)
    else:
        poison = offs < 0
    unwritten = bad & poison
    nonfinite = m & expect_finite & ~o_finite & ~unwritten
    rest = bad & ~unwritten & ~(expect_finite & ~o_finite)
    rel = tl.where(exp == exp, err / tl.maximum(tl.abs(exp), rel_floor), 0.0)
    base = pid.to(tl.int64) * NF
    tl.store(f_ptr + base + 0, tl.max(tl.where(m, err, 0.0), axis=0))
    tl.store(f_ptr + base + 1, tl.max(tl.where(m, rel, 0.0), axis=0))
    tl.store(f_ptr + base + 2, tl.max(tl.where(m, ratio, 0.0), axis=0))
    tl.store(f_ptr + base + 3, tl.max(tl.where(m & expect_finite, tol_bound, 0.0), axis=0))
    ok = m & expect_finite & o_finite
    tl.store(f_ptr + base + 4, tl.sum(tl.where(ok, o, 0.0), axis=0))
    tl.store(f_ptr + base + 5, tl.sum(tl.where(ok, o * o, 0.0), axis=0))
    tl.store(f_ptr + base + 6, tl.sum(tl.where(ok, exp, 0.0), axis=0))
    tl.store(f_ptr + base + 7, tl.sum(tl.where(ok, exp * exp, 0.0), axis=0))
    tl.store(f_ptr + base + 8, tl.max(tl.where(ok, tl.abs(exp), 0.0), axis=0))
    tl.store(f_ptr + base + 9, tl.max(tl.where(ok, tl.abs(o), 0.0), axis=0))
    ibase = pid.to(tl.int64) * NI
    tl.store(i_ptr + ibase + 0, tl.sum(unwritten.to(tl.int32), axis=0))
    tl.store(i_ptr + ibase + 1, tl.sum(nonfinite.to(tl.int32), axis=0))
    tl.store(i_ptr + ibase + 2, tl.sum(rest.to(tl.int32), axis=0))
    tl.store(i_ptr + ibase + 3, tl.min(tl.where(m, ok.to(tl.int32), 1), axis=0))


@triton.jit
def _pair_kernel(a_ptr, b_ptr, s_ptr, part_ptr, k_ptr, N, BLOCK_SIZE: tl.constexpr):
    atol, rtol, floor, big = tl.load(k_ptr), tl.load(k_ptr + 1), tl.load(k_ptr + 2), tl.load(k_ptr + 3)
    pid, offs, m = _block(N, BLOCK_SIZE)
    a, b = _load64(a_ptr, offs, m), _load64(b_ptr, offs, m)
    scale = tl.abs(_load64(s_ptr, offs, m))
    inf = float("inf")
    same = ((a != a) & (b != b)) | (a == b)
    d = tl.abs(a - b)
    diff = tl.where(same, 0.0, tl.where(d == d, d, inf))
    scale = tl.where(scale == scale, tl.where(scale == inf, big, scale), 0.0)  # torch.nan_to_num
    bound = tl.maximum(atol + rtol * scale, floor)
    ratio = tl.where(m & (diff != 0.0), diff / bound, 0.0)
    tl.store(part_ptr + pid, tl.max(ratio, axis=0))


#: Set while no compile of these kernels runs in the background (`start_warmup` clears it while it does).
WARMED = threading.Event()
WARMED.set()
#: Seconds a comparison waits for the background compile before it compiles the kernels itself.
WARM_WAIT_S = 120.0


def usable(o: torch.Tensor, n: torch.Tensor, e: torch.Tensor, interpreter: bool = False) -> bool:
    """Whether the kernels can judge these: real floats on one GPU (with `interpreter`, under Triton's interpreter
    too); waits for a background compile of the kernels rather than compiling them again."""
    tensors = (o, n, e)
    if not all(t.is_floating_point() for t in tensors) or len({t.device for t in tensors}) != 1:
        return False
    fits = o.is_cuda or (interpreter and os.environ.get("TRITON_INTERPRET") == "1")
    if fits and not WARMED.is_set():
        WARMED.wait(WARM_WAIT_S)
    return fits


def _float64s(device: torch.device, *values: float) -> torch.Tensor:
    """Scalars for a kernel in float64 (Triton passes a Python float as float32)."""
    return torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)


def native_error(n: torch.Tensor, e: torch.Tensor) -> float:
    nf, ef = n.detach().reshape(-1), e.detach().reshape(-1)
    blocks = triton.cdiv(nf.numel(), BLOCK)
    if not blocks:
        return 0.0
    part = torch.empty(blocks, dtype=torch.float64, device=nf.device)
    _native_error_kernel[(blocks,)](nf, ef, part, nf.numel(), BLOCK_SIZE=BLOCK)
    return float(part.max())


def pair_worst(a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, atol: float, rtol: float,
               floor: float) -> float:
    """Largest |a - b| / max(atol + rtol |scale|, floor) (0 where equal or both NaN, Inf where one is NaN)."""
    af, bf, sf = a.detach().reshape(-1), b.detach().reshape(-1), scale.detach().reshape(-1)
    blocks = triton.cdiv(af.numel(), BLOCK)
    if not blocks:
        return 0.0
    part = torch.empty(blocks, dtype=torch.float64, device=af.device)
    consts = _float64s(af.device, atol, rtol, floor, torch.finfo(torch.float64).max)
    _pair_kernel[(blocks,)](af, bf, sf, part, consts, af.numel(), BLOCK_SIZE=BLOCK)
    return float(part.max())


def tally(o: torch.Tensor, n: torch.Tensor, e: torch.Tensor, atol: float, rtol: float, floor: float) -> dict[str, Any]:
    """`o` against the native `n` and float64 `e` references under max(atol + rtol |expected|, floor): the bad mask,
    the counts per kind with the first block of each, and the extremes and sums `_Tally` gathers."""
    of, nf, ef = o.detach().reshape(-1), n.detach().reshape(-1), e.detach().reshape(-1)
    count = of.numel()
    blocks = max(1, triton.cdiv(count, BLOCK))
    bad = torch.empty(count, dtype=torch.int8, device=of.device)
    fpart = torch.empty((blocks, len(F64_FIELDS)), dtype=torch.float64, device=of.device)
    ipart = torch.empty((blocks, len(I32_FIELDS)), dtype=torch.int32, device=of.device)
    view = int_view(o)  # the output's bits, and the two integer values its poison reads as
    bits, (p1, p2) = (view.reshape(-1), poison_words(view.dtype)) if view is not None else (of, (0, 0))
    consts = _float64s(of.device, atol, rtol, floor, max(float(atol), 1e-300))
    _tally_kernel[(blocks,)](of, nf, ef, bits, bad, fpart, ipart, consts, count, p1, p2,
                             HAS_POISON=view is not None, NF=len(F64_FIELDS), NI=len(I32_FIELDS), BLOCK_SIZE=BLOCK)
    fmax, fsum = fpart.max(dim=0).values.tolist(), fpart.sum(dim=0).tolist()
    per_block = ipart.to(torch.int64)
    counts = per_block[:, :3].sum(dim=0).tolist()
    first_block = {name: int(torch.nonzero(per_block[:, j])[0]) for j, name in enumerate(I32_FIELDS[:3]) if counts[j]}
    out: dict[str, Any] = {"bad": bad.view(torch.bool).view(o.shape),
                           "counts": dict(zip(I32_FIELDS[:3], (int(c) for c in counts), strict=True)),
                           "first_block": first_block, "all_finite": bool(per_block[:, 3].min() == 1)}
    for j, name in enumerate(F64_FIELDS):
        out[name] = fsum[j] if name.startswith("sum_") else fmax[j]
    return out


#: Elements per program of the re-check's kernel (`recheck.mismatch`).
RECHECK_BLOCK = 4096


@triton.jit
def _count_off_kernel(g_ptr, e_ptr, n, atol2, rtol2, floor2, out_ptr, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    g = tl.load(g_ptr + offs, mask=inside, other=0).to(WIDE)
    e = tl.load(e_ptr + offs, mask=inside, other=0).to(WIDE)
    err = tl.abs(g - e)
    bound = tl.maximum(atol2 + rtol2 * tl.abs(e), floor2)
    ok = ((err <= bound) & (tl.abs(e) < float("inf"))) | (g == e) | ((g != g) & (e != e))
    off = inside & ~ok
    tl.atomic_add(out_ptr, tl.sum(off.to(tl.int32), axis=0))


def flat_real(t: torch.Tensor) -> torch.Tensor:
    return real_view(t).contiguous().reshape(-1)


def wide_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32


def count_off_kernel(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """`recheck.count_off` by the Triton kernel."""
    g, e = flat_real(got), flat_real(expected)
    out = torch.zeros(1, dtype=torch.int32, device=e.device)
    wide = tl.float64 if wide_dtype(expected.dtype) == torch.float64 else tl.float32
    grid = (-(-e.numel() // RECHECK_BLOCK),)
    _count_off_kernel[grid](g, e, e.numel(), 2.0 * atol, 2.0 * rtol, 2.0 * floor, out, BLOCK=RECHECK_BLOCK, WIDE=wide)
    return int(out.item())


def warm_for(device: str, dtype: torch.dtype) -> None:
    """Launch the four kernels once on a few blocks of `dtype`, a length divisible by 16 as most outputs' are."""
    o = torch.linspace(-2, 2, 3 * BLOCK, device=device).to(dtype)
    e = o.double()
    native_error(o, e)
    pair_worst(o, o, e, 1e-5, 1e-5, 0.0)
    tally(o, o, e, 1e-5, 1e-5, 0.0)
    count_off_kernel(o, o, 1e-5, 1e-5, 0.0)
    if o.is_cuda:
        torch.cuda.synchronize(device)


def start_warmup(device: str, lock: DeviceLock | None) -> threading.Thread | None:
    """Compile the kernels for float32 in a daemon thread (GPU only; each dtype delays a cold judge's first job)."""
    if not device.startswith("cuda"):
        return None
    WARMED.clear()

    def work() -> None:
        try:
            with beside_the_judge(device, lock):
                warm_for(device, torch.float32)
        except Exception:  # noqa: BLE001 - only a warm-up: a comparison compiles what it needs itself
            pass
        finally:
            WARMED.set()

    thread = threading.Thread(target=work, name="kwb-warm-compare", daemon=True)
    thread.start()
    return thread
