"""The one-pass re-check of timed outputs (`judge/correctness/recheck.py`) counts exactly the elements the elementwise
rule counts: the Triton kernel (the interpreter here, the GPU in tests/gpu), the sliced torch count and the rule
written out on whole tensors agree on every edge (NaN, infinities, the k E floor, dtypes, complex)."""

from __future__ import annotations

import os

import pytest
import torch

from workbench.eval.judge.correctness import compare_fused
from workbench.eval.judge.correctness import recheck as recheck_compare

ATOL, RTOL = 1e-5, 1e-5


def rule(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, floor: float) -> int:
    """The rule written out on whole tensors, every temporary (complex as its parts: the elementwise code before the
    kernel cast complex outputs to float32 first, which dropped their imaginary parts)."""
    wide = torch.float64 if expected.dtype in (torch.float64, torch.complex128) else torch.float32
    if expected.is_complex():
        expected, got = torch.view_as_real(expected), torch.view_as_real(got)
    e, g = expected.to(wide), got.to(wide)
    bound = torch.clamp_min(atol + rtol * e.abs(), floor) * 2
    err = (g - e).abs()
    off = (~(err <= bound) | ~torch.isfinite(e)) & ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
    return int(off.sum())


def edge_pair(dtype: torch.dtype = torch.float32, n: int = 10_000) -> tuple[torch.Tensor, torch.Tensor]:
    """Expected and got with every kind of element the rule distinguishes, in known places."""
    gen = torch.Generator().manual_seed(0)
    expected = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
    got = expected.clone()
    got[:50] += 1e-7  # well within atol + rtol |e|
    got[50:60] += 0.5  # off
    expected[60], got[60] = float("nan"), float("nan")  # NaN against NaN: agrees
    got[61] = float("nan")  # NaN against a number: off
    expected[62], got[62] = float("inf"), float("inf")  # equal infinities: agree
    expected[63], got[63] = float("inf"), 1.0  # an expected infinity met by a number: off
    got[64] = float("inf")  # a number met by an infinity: off
    expected[65], got[65] = float("-inf"), float("inf")  # opposite infinities: off
    expected[66], got[66] = float("nan"), 1.0  # expected NaN, got a number: off
    return got, expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_sliced_torch_count_is_the_rule(dtype, monkeypatch):
    got, expected = edge_pair(dtype)
    want = rule(got, expected, ATOL, RTOL, 0.0)
    assert want >= 15  # the edges above that are off, and fp16/bf16 rounding of the small shifts may add more
    assert recheck_compare.count_off_torch(got, expected, ATOL, RTOL, 0.0) == want
    monkeypatch.setattr(recheck_compare, "MESSAGE_CHUNK", 999)  # many slices, one ragged
    assert recheck_compare.count_off_torch(got, expected, ATOL, RTOL, 0.0) == want
    assert recheck_compare.count_off(got, expected, ATOL, RTOL, 0.0) == want  # the CPU takes the torch count


def test_the_native_error_floor_lets_an_error_within_k_times_it_pass():
    got, expected = edge_pair()
    strict = rule(got, expected, ATOL, RTOL, 0.0)
    loose = rule(got, expected, ATOL, RTOL, 0.3)  # 2 x 0.3 covers the +0.5 shifts
    assert strict - loose == 10
    assert recheck_compare.count_off_torch(got, expected, ATOL, RTOL, 0.3) == loose


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the kernel runs on the CPU only interpreted")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("floor", [0.0, 0.3])
def test_the_kernel_counts_what_the_rule_counts(dtype, floor):
    got, expected = edge_pair(dtype, n=compare_fused.RECHECK_BLOCK * 2 + 77)  # two full programs and a ragged one
    assert compare_fused.count_off_kernel(got, expected, ATOL, RTOL, floor) == rule(got, expected, ATOL, RTOL,
                                                                                        floor)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the kernel runs on the CPU only interpreted")
def test_the_kernel_reads_complex_outputs_as_their_parts():
    got, expected = edge_pair(torch.float32, n=2000)
    g, e = torch.complex(got, got.flip(0)), torch.complex(expected, expected.flip(0))
    assert compare_fused.count_off_kernel(g, e, ATOL, RTOL, 0.0) == rule(g, e, ATOL, RTOL, 0.0) > 0


def test_a_mismatch_message_counts_and_names_the_largest_finite_error():
    got, expected = edge_pair()
    message = recheck_compare.mismatch(got, expected, None, 0.0)
    assert message.startswith(f"{rule(got, expected, ATOL, RTOL, 0.0)} of 10000 elements off")
    assert message.endswith("largest error 0.5")
    assert recheck_compare.mismatch(expected.clone(), expected, None, 0.0) == ""
    assert recheck_compare.largest_error(got[61:62], expected[61:62]) == float("inf")  # no finite error at all
