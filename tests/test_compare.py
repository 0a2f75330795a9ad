"""The error budget: an output passes within max(atol + rtol |ref64|, k x max|native - ref64|). Honest fp32
reorderings of long reductions pass where the tolerance alone fails them; fp16, bf16 and TF32 operands still fail;
the bound is robust where the native error happens to be zero at an element; and the budget used is recorded."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import workbench as wb
from workbench.eval.judge.correctness import check as correctness
from workbench.eval.judge.correctness.compare import ERROR_BUDGET_K, compare, merge_budgets, native_scale
from workbench.tasks.precision import applied, round_to_tf32
from workbench.tasks.task import Tolerance

TOL = {"float32": Tolerance(1e-5, 1e-5)}.get


def tol_for(dtype: str) -> Tolerance:
    return Tolerance(1e-5, 1e-5)


def _matmul_case(k: int = 4096, seed: int = 0):
    """Normal inputs, long K: outputs ~ sqrt(K) with many near zero, so fp32 roundoff exceeds rtol there."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(48, k, generator=g), torch.randn(k, 40, generator=g)
    ref64 = a.double() @ b.double()
    native = a @ b
    return a, b, ref64, native


def _split_k(a: torch.Tensor, b: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    out = torch.zeros(a.shape[0], b.shape[1])
    for i in range(0, a.shape[1], chunk):
        out = out + a[:, i:i + chunk] @ b[i:i + chunk]
    return out


def _rounded(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x.to(dtype).to(torch.float32)


def test_k_is_the_documented_constant():
    assert ERROR_BUDGET_K == 16.0
    with pytest.raises(ValueError, match="k must be a number >= 0"):
        compare(torch.zeros(2), torch.zeros(2, dtype=torch.float64), torch.zeros(2), tol_for, k=-1)


def test_honest_split_k_fails_the_tolerance_alone_but_passes_the_budget():
    a, b, ref64, native = _matmul_case()
    honest = _split_k(a, b)
    strict = compare(honest, ref64, native, tol_for, k=0)
    assert [f for f, _ in strict.flags] == ["mismatch"]  # what the fixed tolerance used to say
    assert not compare(native, ref64, native, tol_for, k=0).ok  # even the reference itself failed it
    cmp = compare(honest, ref64, native, tol_for)
    assert cmp.ok, cmp.flags
    budget = cmp.budget
    assert budget["k"] == 16.0 and budget["tolerance"] == {"atol": 1e-5, "rtol": 1e-5}
    assert budget["native_error"] == pytest.approx(float((native.double() - ref64).abs().max()))
    assert budget["native_bound"] == pytest.approx(16.0 * budget["native_error"])
    assert budget["native_error"] > 1e-5 and budget["bound"] in ("k x native", "both")
    assert 0 < budget["worst_ratio"] <= 1 and budget["norm"] == "max-abs per output"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, "tf32"])
def test_lower_precision_operands_still_fail_with_the_budget(dtype):
    a, b, ref64, native = _matmul_case()
    if dtype == "tf32":
        low = round_to_tf32(a) @ round_to_tf32(b)
    else:
        low = _rounded(a, dtype) @ _rounded(b, dtype)
    cmp = compare(low, ref64, native, tol_for)
    assert [f for f, _ in cmp.flags] == ["mismatch"]
    assert cmp.budget["worst_ratio"] > 10  # not a near miss: far outside k x the native error
    detail = cmp.flags[0][1]
    assert "16 x the native error" in detail and "atol=1e-05" in detail


def test_tf32_passes_only_when_the_task_allows_it():
    """The native reference runs under the task's precision policy: with TF32 allowed its own error is TF32's."""
    a, b, ref64, _ = _matmul_case(k=2048, seed=1)
    candidate = round_to_tf32(a) @ round_to_tf32(b)
    with applied("tf32", "cpu"):
        native_tf32 = a @ b
    with applied("ieee", "cpu"):
        native_ieee = a @ b
    assert compare(candidate, ref64, native_tf32, tol_for).ok
    assert not compare(candidate, ref64, native_ieee, tol_for).ok


def test_bound_is_normwise_so_a_lucky_exact_native_element_does_not_reject_an_honest_one():
    """Where the native result happens to be exact at an element, an elementwise k x |native_i - ref_i| bound
    would be zero there; the per-output scale is not."""
    ref64 = (torch.linspace(-3, 3, 1000, dtype=torch.float64) * 1e3).float().double()  # fp32-representable
    noise = torch.randn(1000, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2e-2
    native = (ref64 + noise).float()
    native[500] = ref64[500].float()  # exact here by luck (ref 0 at the middle of the range)
    honest = (ref64 + noise.flip(0)).float()  # another order's roundoff, same size, nonzero at element 500
    assert float((native.double() - ref64)[500].abs()) == 0.0 and float((honest.double() - ref64)[500].abs()) > 1e-3
    assert compare(honest, ref64, native, tol_for).ok
    assert not compare(honest, ref64, native, tol_for, k=0).ok


def test_exact_elementwise_ops_are_judged_by_the_tolerance_alone():
    x = torch.randn(256, 64, generator=torch.Generator().manual_seed(4))
    native = torch.relu(x)
    ref64 = torch.relu(x.double())
    assert native_scale(native.double(), ref64) == 0.0
    cmp = compare(torch.relu(_rounded(x, torch.float16)), ref64, native, tol_for)
    assert not cmp.ok and cmp.budget["bound"] == "tolerance" and cmp.budget["native_error"] == 0.0
    ok = compare(native.clone(), ref64, native, tol_for)
    assert ok.ok and ok.budget["worst_ratio"] == 0.0


def test_the_budget_does_not_hide_zero_or_stale_outputs():
    a, b, ref64, native = _matmul_case(k=1024)
    zeros = compare(torch.zeros_like(native), ref64, native, tol_for)
    assert {"mismatch", "degenerate-output"} <= {f for f, _ in zeros.flags}
    nan = native.clone()
    nan[0, 0] = float("nan")
    assert "non-finite" in {f for f, _ in compare(nan, ref64, native, tol_for).flags}


def test_native_error_ignores_non_finite_elements():
    ref64 = torch.tensor([1.0, float("inf"), 3.0], dtype=torch.float64)
    native = torch.tensor([1.0 + 1e-6, float("inf"), 3.0])
    assert native_scale(native.double(), ref64) == float(native[0]) - 1.0  # the inf element is left out
    assert compare(native.clone(), ref64, native, tol_for).ok


def test_merge_keeps_the_worst_comparisons_record_whole():
    """One definition of the budget: the record of the comparison with the worst ratio, its native error and its
    k x native error together (a largest native error from another comparison would not add up with them)."""
    a = {"k": 16.0, "native_error": 1e-4, "native_bound": 1.6e-3, "worst_ratio": 0.2, "bound": "both",
         "tolerance": {"atol": 1e-5}}
    b = {"k": 16.0, "native_error": 5e-5, "native_bound": 8e-4, "worst_ratio": 0.7, "bound": "tolerance",
         "tolerance": {"atol": 1e-5}}
    merged = merge_budgets(a, {}, b)
    assert merged["worst_ratio"] == 0.7 and merged["bound"] == "tolerance" and merged["native_error"] == 5e-5
    assert merged["native_bound"] == merged["k"] * merged["native_error"]
    assert merged["merged"] == 2 and merge_budgets() == {} and merge_budgets({}, {}) == {}


def test_tuple_outputs_get_one_record_each():
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(5))
    ref = (x.double().sum(1), x.double().amax(1))
    native = (x.sum(1), x.amax(1))
    cmp = compare((native[0].clone(), native[1].clone()), ref, native, tol_for)
    assert cmp.ok and len(cmp.budget["outputs"]) == 2


# ---- through the correctness protocol ------------------------------------------------------------------------

MATMUL = """
import torch
import torch.nn as nn

M = 24
K = 4096
N = 16


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
"""


class SplitK(nn.Module):
    def forward(self, a, b):
        return _split_k(a, b, 512)


class Tf32(nn.Module):
    def forward(self, a, b):
        return round_to_tf32(a) @ round_to_tf32(b)


class Fp16(nn.Module):
    def forward(self, a, b):
        return (a.half() @ b.half()).float()


def _protocol(cls: type, task: wb.Task) -> correctness.CheckReport:
    return correctness.run_correctness(task.load(), cls, device="cpu", sizes=[{}], seed=0, tolerance=task.tolerance,
                                       distributions=("default", "normal", "uniform"))


def test_protocol_records_the_budget_and_passes_split_k_but_not_tf32_or_fp16():
    task = wb.Task.from_source(MATMUL, name="long_k")
    honest = _protocol(SplitK, task)
    assert honest.passed, honest.findings
    eb = honest.error_budget
    assert set(eb) >= {"tolerance", "k", "native_error", "native_bound", "bound", "worst_ratio"}
    assert eb["native_error"] > 1e-5 and eb["worst_ratio"] <= 1 and eb["merged"] >= 10  # 5 rounds x 2 calls
    for cls in (Tf32, Fp16):
        bad = _protocol(cls, task)
        assert bad.flags == ["mismatch"] and bad.error_budget["worst_ratio"] > 1


def test_protocol_under_a_tf32_task_accepts_tf32_math():
    """How the engine applies a task's policy: around reference and candidate calls alike."""
    task = wb.Task.from_source(MATMUL, name="long_k_tf32", precision="tf32")
    with applied(task.precision, "cpu"):
        assert _protocol(Tf32, task).passed
        assert _protocol(Fp16, task).flags == ["mismatch"]  # fp16 is coarser than TF32 in range, not only bits


def test_large_outputs_are_judged_in_slices_with_the_same_verdicts(monkeypatch):
    # A billion-element output cannot be judged in float64 in one piece on a GPU; the sliced path must agree with
    # the whole-tensor path on every verdict and number (here forced on small tensors).
    from workbench.eval.judge.correctness import compare as compare_module
    from workbench.eval.runner.poison import POISON_WORD

    torch.manual_seed(1)
    x = torch.randn(300, 200)
    ref64, nat = x.double().exp(), x.exp()
    poisoned = nat.clone()
    poisoned.view(-1)[1000:1010].view(torch.int32).fill_(POISON_WORD)
    cases = {"ok": nat.clone(), "wrong": nat.clone().index_fill_(0, torch.tensor([7]), 3.0),
             "zero": torch.zeros_like(nat), "poisoned": poisoned}
    tol = lambda name: Tolerance(1e-5, 1e-5)  # noqa: E731
    for name, out in cases.items():
        whole = compare(out, ref64, nat, tol)
        monkeypatch.setattr(compare_module, "CHUNK", 4096)
        sliced = compare(out, ref64, nat, tol)
        monkeypatch.undo()
        assert [f for f, _ in sliced.flags] == [f for f, _ in whole.flags], name
        assert [d for _, d in sliced.flags if _ != "degenerate-output"] == \
            [d for f, d in whole.flags if f != "degenerate-output"], name
        assert sliced.max_abs == pytest.approx(whole.max_abs) and sliced.ok == whole.ok, name
        assert torch.equal(sliced.bad[0], whole.bad[0]), name


@pytest.mark.parametrize("name", ["TF32", "bfloat16", "float16"])
def test_a_mismatch_from_reduced_precision_operands_is_named(name):
    """`mismatch_hint.diagnose`: an output computed on operands rounded to TF32, bf16 or fp16 is recognised as that
    precision's (fp16 as TF32's: the same 10-bit mantissa, and both are named); an output wrong in another way is
    not."""
    from workbench.eval.judge.correctness import mismatch_hint

    torch.manual_seed(0)
    model = torch.nn.Linear(512, 64)
    x = torch.randn(32, 512)
    ref64 = torch.nn.functional.linear(x.double(), model.weight.double(), model.bias.double())
    rounding = {**{n: r for n, r, _ in mismatch_hint.EMULATIONS},
                "float16": lambda t: t.to(torch.float16).to(torch.float32)}[name]
    with torch.no_grad():
        out = torch.nn.functional.linear(rounding(x), rounding(model.weight), rounding(model.bias))
    hint = mismatch_hint.diagnose(model, [x], 0, out, ref64, "cpu")
    assert hint.startswith(f"; the errors match {'TF32' if name == 'float16' else name} rounding"), hint
    assert name != "float16" or "float16 operands" in hint
    wrong = ref64.float() * 1.001
    assert mismatch_hint.diagnose(model, [x], 0, wrong, ref64, "cpu") == ""


def test_a_mismatch_of_a_reference_that_draws_random_numbers_says_so():
    """`mismatch_hint.diagnose`: where the reference's forward draws random numbers (KernelBench's LSTMs draw their
    initial state), a candidate drawing other numbers (torch.compile by default) is told to draw the same ones; a
    reference that draws none gets no such words."""
    from workbench.eval.judge.correctness import mismatch_hint
    from workbench.eval.wire.timed_loop import seed_rng

    class Noisy(torch.nn.Module):
        def forward(self, x):
            return x + torch.randn_like(x)

    x = torch.randn(64, 32)
    seed_rng(7)
    ref64 = (x + torch.randn_like(x)).double()
    seed_rng(8)
    other_draws = x + torch.randn_like(x)
    assert mismatch_hint.diagnose(Noisy(), [x], 7, other_draws, ref64, "cpu") == mismatch_hint.RANDOM_DRAWS
    assert "fallback_random = True" in mismatch_hint.RANDOM_DRAWS
    assert mismatch_hint.diagnose(torch.nn.Identity(), [x], 7, x * 1.01, x.double(), "cpu") == ""


ILL_CONDITIONED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x * 1000.0)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


class OnePercentOff(nn.Module):
    def forward(self, x):
        return torch.sin(x * 1000.0) * 1.01


def test_a_round_whose_float32_reference_diverges_widens_only_its_own_budget():
    """At 1e3 times the magnitude ("large" inputs) float32's sin(1000 x) is off by tenths, so that round's budget (16 x
    the native error) covers any answer; the other rounds keep theirs, and an output 1% off fails there (KernelBench's
    GRUs and Mamba2 have such a round)."""
    task = wb.Task.from_source(ILL_CONDITIONED, name="sin_1000x")
    rounds = dict(device="cpu", sizes=[{}], seed=0, tolerance=task.tolerance, distributions=("default", "large"))
    ref = task.load()
    honest = correctness.run_correctness(ref, ref.module.Model, **rounds)
    assert honest.passed, honest.findings
    off = correctness.run_correctness(ref, OnePercentOff, **rounds)
    assert off.flags == ["mismatch"], off.findings
    assert "large inputs" not in off.findings[0].detail, off.findings
    large_only = correctness.run_correctness(ref, OnePercentOff, **{**rounds, "distributions": ("large",)})
    assert large_only.passed and large_only.error_budget["native_bound"] > 0.1  # that round alone cannot tell
