"""The one-pass judgement of a large output (`judge/correctness/compare_fused.py`) gives the sliced torch judgement's
verdicts word for word: the same flags and messages (first indices included), the same bad elements, extremes and
error budget. Both paths run here on the CPU (the kernels under Triton's interpreter) on outputs that hold every kind
of element the judgement tells apart: right, off by more than the tolerance, NaN or Inf where the reference is
finite, the reference's own NaN and Inf, and poison the candidate never overwrote.
"""

from __future__ import annotations

import os

import pytest
import torch

from workbench.eval.judge.correctness import compare as chunked
from workbench.eval.judge.correctness import compare_fused as fused
from workbench.eval.judge.correctness.compare import Comparison
from workbench.eval.runner.poison import POISON_WORD
from workbench.tasks.task import Tolerance

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                                reason="the kernels need a GPU or Triton's interpreter")

N = 3 * fused.BLOCK + 517  # several blocks, the last one partial


def _poison(dtype: torch.dtype, count: int) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.full((count,), POISON_WORD, dtype=torch.int32).view(torch.float32)
    if dtype == torch.float64:
        return torch.full((count,), POISON_WORD << 32 | POISON_WORD, dtype=torch.int64).view(torch.float64)
    return torch.full((count,), POISON_WORD >> 16, dtype=torch.int16).view(dtype)


def _case(dtype: torch.dtype, faults: bool, seed: int = 0, device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    ref64 = torch.randn(N, generator=g, dtype=torch.float64) * 3
    native = ref64.to(dtype).clone()
    out = native.clone()
    if faults:
        out[fused.BLOCK + 7] += 0.5  # off
        out[2 * fused.BLOCK + 100: 2 * fused.BLOCK + 110] *= 1.5  # off, a run of them
        out[fused.BLOCK + 9] = float("nan")  # NaN where the reference is finite
        out[3 * fused.BLOCK + 3] = float("inf")
        out[2 * fused.BLOCK + 500: 2 * fused.BLOCK + 520] = _poison(dtype, 20)  # never written
        native[5] = float("nan")  # the reference's own NaN, matched by the output
        out[5] = float("nan")
        native[6] = float("inf")  # the reference's own Inf, not matched
        out[6] = 1.0
    return out.to(device), native.to(device), ref64.to(device)


def _judge(mode: str, out, native, ref64, tol, k=8.0) -> Comparison:
    chunked.FUSED = mode
    try:
        cmp = Comparison(True, None, None, None, [], [None])
        chunked._compare_floats(cmp, 0, out, ref64, native, tol, "", k)
        return cmp
    finally:
        chunked.FUSED = "auto"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("faults", [False, True])
def test_the_one_pass_judgement_is_the_sliced_one(dtype, faults, device="cpu"):
    out, native, ref64 = _case(dtype, faults, device=device)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    sliced, one_pass = _judge("never", out, native, ref64, tol), _judge("always", out, native, ref64, tol)
    assert one_pass.flags == sliced.flags
    assert torch.equal(one_pass.bad[0], sliced.bad[0])
    assert one_pass.poisoned == sliced.poisoned
    for name in ("max_abs", "max_rel", "worst"):
        assert getattr(one_pass, name) == pytest.approx(getattr(sliced, name), rel=1e-12), name
    a, b = one_pass.budget["outputs"][0], sliced.budget["outputs"][0]
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-12) if isinstance(a[key], float) else a[key] == b[key], key
    if faults:
        kinds = {flag for flag, _ in one_pass.flags}
        assert {"mismatch", "non-finite", "unwritten-output"} <= kinds, one_pass.flags
        assert int(one_pass.bad[0].sum()) >= 20 + 3  # the poison, the NaN, the Inf, the unmatched reference Inf


def test_a_constant_output_reads_as_degenerate_on_both_paths():
    _, native, ref64 = _case(torch.float32, False, seed=3)
    out = torch.zeros_like(native)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    sliced, one_pass = _judge("never", out, native, ref64, tol), _judge("always", out, native, ref64, tol)
    assert one_pass.flags == sliced.flags
    assert any(flag == "degenerate-output" and "zero" in text for flag, text in one_pass.flags)


def test_without_a_float64_reference_the_native_one_is_expected():
    out, native, _ = _case(torch.float32, True, seed=5)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    sliced = _judge("never", out, native, None, tol)
    one_pass = _judge("always", out, native, None, tol)
    assert one_pass.flags == sliced.flags and one_pass.budget == sliced.budget


def test_the_kernels_stay_off_the_cpu_unless_asked():
    t = torch.ones(4)
    assert not fused.usable(t, t, t.double())
    assert fused.usable(t, t, t.double(), interpreter=True)
    assert not fused.usable(t, t, torch.ones(4, dtype=torch.complex64), interpreter=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_one_pass_bound_of_two_calls_is_the_sliced_one(dtype, device="cpu"):
    """`correctness._pair_ratio` (how far two calls on the same inputs differ) against the one-pass kernels."""
    from workbench.eval.judge.correctness.check import _pair_ratio
    from workbench.eval.judge.correctness.compare import ERROR_BUDGET_K

    a, native, ref64 = _case(dtype, True, seed=7)
    b = a.clone()
    b[11] += 0.25  # a reordered sum, larger than the bound
    b[fused.BLOCK + 9] = 1.0  # NaN in one call only
    b[2 * fused.BLOCK + 1] = float("nan")
    a[2 * fused.BLOCK + 1] = float("nan")  # NaN in both: the same
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    sliced = _pair_ratio(a, b, native, ref64, tol)
    floor = ERROR_BUDGET_K * fused.native_error(native.to(device), ref64.to(device))
    one_pass = fused.pair_worst(a.to(device), b.to(device), ref64.to(device), tol.atol, tol.rtol, floor)
    assert one_pass == sliced == float("inf")
    b[fused.BLOCK + 9] = a[fused.BLOCK + 9]
    sliced = _pair_ratio(a, b, native, ref64, tol)
    one_pass = fused.pair_worst(a.to(device), b.to(device), ref64.to(device), tol.atol, tol.rtol, floor)
    assert one_pass == pytest.approx(sliced, rel=1e-12) and sliced > 0


def test_where_the_kernels_count_an_element_torch_does_not_find_the_slices_decide(monkeypatch):
    """A kernel that counted a bad element the torch re-judgement of its block cannot find (a disagreement between
    the two paths) never makes a message without an index: the sliced judgement stands."""
    out, native, ref64 = _case(torch.float32, False, seed=11)
    real = fused.tally

    def miscounting(*args, **kwargs):
        got = real(*args, **kwargs)
        got["counts"]["rest"] = 1
        got["first_block"]["rest"] = 0
        return got

    monkeypatch.setattr(fused, "tally", miscounting)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    one_pass = _judge("always", out, native, ref64, tol)
    assert one_pass.flags == [] and not bool(one_pass.bad[0].any())


def test_the_judges_start_up_compile_launches_every_kernel_and_a_comparison_waits_for_it():
    """`compare_fused.start_warmup`: the kernels a float32 comparison launches, launched at the judge's start; a comparison that
    comes while that compile runs waits for it instead of compiling the same kernels beside it."""
    import threading
    import time

    fused.warm_for("cpu", torch.float32)  # under the interpreter here: every launch runs
    assert fused.start_warmup("cpu", None) is None and fused.WARMED.is_set()  # off the GPU: nothing to compile
    o = torch.ones(8)
    fused.WARMED.clear()
    timer = threading.Timer(0.3, fused.WARMED.set)
    started = time.perf_counter()
    timer.start()
    assert fused.usable(o, o, o.double(), interpreter=True)
    assert time.perf_counter() - started >= 0.25
    assert not fused.usable(o.to(torch.int32), o, o.double(), interpreter=True)  # not floats: never waits
