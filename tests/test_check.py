"""The correctness protocol, called in this process: every flag it can raise is triggered by a deliberately bad
candidate, honest candidates pass, and the report shows what was checked (rounds, sizes, distributions)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import triton
import triton.language as tl

import workbench as wb
from workbench.errors import TaskError
from workbench.eval.checks.flags import FLAGS
from workbench.eval.judge.correctness import check as correctness
from workbench.eval.judge.correctness import compare
from workbench.eval.judge.reference.rounds import build_reference
from workbench.eval.runner import poison
from workbench.tasks.task import DISTRIBUTIONS

SOFTMAX = '''
import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

MATMUL = '''
import torch
import torch.nn as nn

M = 16
K = 256
N = 24


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
'''

#: The protocol runs where the tests run: on a GPU machine the CUDA allocator's poisoning is what is tested.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

SOFTMAX_SIZES = [{"batch_size": 8, "dim": 64}, {"batch_size": 5, "dim": 37}]


def _task(source: str, **kw) -> wb.Task:
    return wb.Task.from_source(source, name="t", **kw)


def _run(task: wb.Task, cls: type, sizes: list[dict] | None = None, **kw) -> correctness.CheckReport:
    sizes = sizes or [task.size(None, "cpu")]
    return correctness.run_correctness(task.load(), cls, device=kw.pop("device", DEVICE), sizes=sizes, seed=kw.pop("seed", 0),
                                 tolerance=task.tolerance, distributions=kw.pop("distributions", task.distributions),
                                 **kw)


@pytest.fixture(scope="module")
def softmax() -> wb.Task:
    return _task(SOFTMAX, sizes=SOFTMAX_SIZES[0])


# ---- candidates ------------------------------------------------------------------------------------------------

class HonestSoftmax(nn.Module):
    """Another order of operations than torch.softmax: same answer within fp32 rounding."""

    def forward(self, x):
        e = torch.exp(x - x.max(-1, keepdim=True).values)
        return e / e.sum(-1, keepdim=True)


class EmptyLike(nn.Module):
    """docs/anti-cheating.md, cheat 1: returns allocated memory and hopes it still holds the reference's result."""

    def forward(self, x):
        return torch.empty_like(x)


class LastRowUnwritten(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        y[:-1] = torch.softmax(x[:-1], dim=-1)
        return y


class RightOnceThenEmpty(nn.Module):
    """Correct on its first call only: the second call of round 1 comes after the reference ran."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.softmax(x, dim=-1) if self.calls == 1 else torch.empty_like(x)


class ReturnsPreviousResult(nn.Module):
    """Hands back the result of its previous call: right for call 2 (same values), stale in the next round."""

    def __init__(self):
        super().__init__()
        self.previous = None

    def forward(self, x):
        out = self.previous if self.previous is not None and self.previous.shape == x.shape else torch.softmax(x, -1)
        self.previous = torch.softmax(x, -1)
        return out.clone()


class OffOnEvenCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.softmax(x, dim=-1)
        return y * (1 + 1e-3) if self.calls % 2 == 0 else y


class JitterBelowTolerance(nn.Module):
    """Run-to-run differences of a few ulps (as atomics give on a GPU): accepted."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.softmax(x, dim=-1)
        return y * (1 + 2e-7) if self.calls % 2 else y


class ZeroesItsInput(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        x.zero_()
        return y


class Lazy(torch.Tensor):
    pass


class SubclassOutput(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1).as_subclass(Lazy)


class NumpyOutput(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1).cpu().numpy()


class TupleOutput(nn.Module):
    def forward(self, x):
        return (torch.softmax(x, dim=-1),)


class MetaOutput(nn.Module):
    def forward(self, x):
        return torch.empty_like(x, device="meta")


class DropsLastRow(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)[:-1]


class Float64Output(nn.Module):
    def forward(self, x):
        return torch.softmax(x.double(), dim=-1)


class InfInOneElement(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)
        y[0, 0] = float("inf")
        return y


class Fp16Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x.half(), dim=-1).float()


class ChunkedMatmul(nn.Module):
    """fp32 with another summation order: K in chunks of 64, partial products added."""

    def forward(self, a, b):
        out = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        for k in range(0, a.shape[1], 64):
            out = out + a[:, k:k + 64] @ b[k:k + 64]
        return out


class Fp16Matmul(nn.Module):
    def forward(self, a, b):
        return (a.half() @ b.half()).float()


# ---- honest candidates, coverage of sizes and distributions ------------------------------------------------------

def test_honest_candidate_passes_with_every_size_and_distribution_in_the_rounds(softmax):
    report = _run(softmax, HonestSoftmax, SOFTMAX_SIZES, rounds=2)
    assert report.passed and report.findings == [], report.findings
    # One round per distribution; "normal" would repeat the task's own torch.randn inputs (the default rounds).
    assert len(report.rounds) == len(DISTRIBUTIONS) - 1
    assert [r["dist"] for r in report.rounds] == [d for d in DISTRIBUTIONS if d != "normal"]
    # Every size once, then the one with the fewest input elements (5 x 37), the cheapest for an interpreted kernel.
    assert [r["size"] for r in report.rounds] == SOFTMAX_SIZES + [SOFTMAX_SIZES[1]] * (len(report.rounds) - 2)
    assert len({r["seed"] for r in report.rounds}) == len(report.rounds)
    assert all(r["ok"] and r["flags"] == [] and r["max_abs"] < 1e-6 for r in report.rounds)
    assert len(_run(softmax, HonestSoftmax, SOFTMAX_SIZES, rounds=2, distributions=("default",)).rounds) == 5
    assert 0 < report.max_abs_err < 1e-6 and report.max_rel_err < 1e-5
    assert report.error_map is not None and max(max(row) for row in report.error_map["cells"]) <= 1


def test_more_rounds_than_sizes_and_distributions_cycle_through_them(softmax):
    report = _run(softmax, HonestSoftmax, SOFTMAX_SIZES, rounds=7, distributions=("normal", "uniform"))
    assert [r["dist"] for r in report.rounds] == ["normal", "uniform"] * 3 + ["normal"]
    assert report.passed


def test_fp16_arithmetic_fails_an_fp32_matmul_while_another_fp32_summation_order_passes():
    # Same-sign inputs: heavy-tailed inputs with cancellation need a wider absolute floor, which is a task's
    # choice (the built-in matmul sets one); the default fp32 tolerance is what is under test here.
    task = _task(MATMUL, sizes={"M": 16, "K": 256, "N": 24})
    sizes = [{"M": 16, "K": 256, "N": 24}, {"M": 7, "K": 300, "N": 9}]
    dists = ("default", "uniform", "negative")
    assert _run(task, ChunkedMatmul, sizes, distributions=dists).passed
    bad = _run(task, Fp16Matmul, sizes, distributions=dists)
    assert bad.flags == ["mismatch"] and bad.max_rel_err > 1e-4


def test_fp16_arithmetic_fails_an_fp32_softmax(softmax):
    report = _run(softmax, Fp16Softmax, SOFTMAX_SIZES)
    assert "mismatch" in report.flags and not report.passed


# ---- stale and unwritten memory (docs/anti-cheating.md, cheat 1) -----------------------------------------------------------------

@pytest.mark.parametrize("device", sorted({"cpu", DEVICE}))
def test_empty_like_returned_unwritten_is_stale_memory(softmax, device):
    report = _run(softmax, EmptyLike, SOFTMAX_SIZES, device=device)
    assert not report.passed and report.flags[0] == "stale-memory", report.findings
    assert "poison" in report.findings[0].detail and "call 1" in report.findings[0].detail
    assert all(not r["ok"] for r in report.rounds)


def test_a_partly_written_output_is_unwritten_output(softmax):
    report = _run(softmax, LastRowUnwritten, SOFTMAX_SIZES)
    assert report.flags == ["unwritten-output"], report.findings
    assert "64 of 512" in report.findings[0].detail  # exactly the last row of 8 x 64


def test_right_on_the_first_call_then_unwritten_is_stale_memory(softmax):
    report = _run(softmax, RightOnceThenEmpty, SOFTMAX_SIZES)
    assert report.flags[0] == "stale-memory" and report.findings[0].detail.startswith("round 1 of ")
    assert "call 2" in report.findings[0].detail
    assert report.rounds[0]["flags"] == ["stale-memory"]


def test_returning_an_earlier_result_is_stale_memory(softmax):
    report = _run(softmax, ReturnsPreviousResult, [SOFTMAX_SIZES[0]])
    assert "stale-memory" in report.flags, report.findings
    assert "earlier round's reference result" in dict((f.flag, f.detail) for f in report.findings)["stale-memory"]


def test_poison_is_the_c10_junk_pattern_and_junk_fill_is_off_again_after_the_run(softmax):
    flag = poison.junk_fill_flag()
    if flag is None:
        pytest.skip("this torch build does not export the CPU junk-fill flag")
    _run(softmax, EmptyLike, [SOFTMAX_SIZES[0]], device="cpu")
    assert flag.value is False
    with poison.Poison("cpu").during_call():
        t = torch.empty(33)
    assert bool(poison.poison_mask(t).all()) and bool(torch.isnan(t).all())
    halves = torch.empty(6, dtype=torch.float16)
    halves.view(torch.int32).fill_(poison.POISON_WORD)
    assert bool(poison.poison_mask(halves).all())


# ---- the two calls must agree --------------------------------------------------------------------------------------

def test_two_calls_that_disagree_are_nondeterministic(softmax):
    report = _run(softmax, OffOnEvenCalls, SOFTMAX_SIZES)
    assert "nondeterministic" in report.flags and "mismatch" in report.flags
    assert "differ by up to" in dict((f.flag, f.detail) for f in report.findings)["nondeterministic"]


def test_run_to_run_differences_within_tolerance_are_accepted(softmax):
    report = _run(softmax, JitterBelowTolerance, SOFTMAX_SIZES)
    assert report.passed and report.findings == []


# ---- inputs (docs/anti-cheating.md, cheat 3) ----------------------------------------------------------------------------------------

def test_writing_to_an_input_is_input_mutation(softmax):
    report = _run(softmax, ZeroesItsInput, SOFTMAX_SIZES)
    assert report.flags == ["input-mutation"] and "input(s) [0]" in report.findings[0].detail


def test_nan_inputs_left_alone_are_not_a_mutation():
    source = '''
import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x):
        return torch.nan_to_num(x, nan=0.5)


def get_inputs():
    x = torch.randn(n)
    x[::5] = float("nan")
    return [x]


def get_init_inputs():
    return []
'''

    class Honest(nn.Module):
        def forward(self, x):
            return torch.where(torch.isnan(x), torch.full_like(x, 0.5), x)

    report = _run(_task(source), Honest, distributions=("default",))
    assert report.passed and report.findings == []


# ---- output form (docs/anti-cheating.md, cheat 8 and type checks) -------------------------------------------------------------------

@pytest.mark.parametrize("cls, flag", [
    (SubclassOutput, "lazy-output"), (MetaOutput, "lazy-output"), (NumpyOutput, "wrong-type"),
    (TupleOutput, "wrong-type"), (DropsLastRow, "wrong-shape"), (Float64Output, "wrong-dtype"),
])
def test_outputs_must_be_plain_tensors_of_the_references_form(softmax, cls, flag):
    report = _run(softmax, cls, [SOFTMAX_SIZES[0]])
    assert report.flags == [flag], report.findings
    assert not report.passed and report.max_abs_err is None


def test_an_output_on_another_device_is_wrong_device():
    ref = torch.empty(4, 3, device="meta")  # the only second device a CPU machine has
    cmp = compare.compare(torch.zeros(4, 3), [torch.zeros(4, 3, dtype=torch.float64)], ref, _task(SOFTMAX).tolerance)
    assert [f for f, _ in cmp.flags] == ["wrong-device"] and not cmp.ok


# ---- NaN and Inf -----------------------------------------------------------------------------------------------------

def test_inf_where_the_reference_is_finite_is_non_finite(softmax):
    report = _run(softmax, InfInOneElement, [SOFTMAX_SIZES[0]])
    assert report.flags == ["non-finite"] and "index (0, 0)" in report.findings[0].detail


LOG = '''
import torch
import torch.nn as nn

n = 128


class Model(nn.Module):
    def forward(self, x):
        return torch.log(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


def test_nan_where_the_reference_is_nan_passes_and_a_number_there_does_not():
    class Honest(nn.Module):
        def forward(self, x):
            return torch.log(x.abs()) + torch.where(x < 0, float("nan"), 0.0)

    class FillsNan(nn.Module):
        def forward(self, x):
            return torch.nan_to_num(torch.log(x), nan=0.0)

    task = _task(LOG)
    assert _run(task, Honest).passed  # NaN on the default inputs too: no distribution is skipped
    report = _run(task, FillsNan)
    assert report.flags == ["mismatch"]


def test_a_distribution_on_which_the_reference_is_not_finite_is_skipped_with_a_note():
    source = LOG.replace("torch.log(x)", "torch.sqrt(x)").replace("torch.randn(n)", "torch.rand(n)")

    class Honest(nn.Module):
        def forward(self, x):
            if bool((x < 0).any()):  # never called on the skipped distributions
                raise ValueError("negative input")
            return x ** 0.5

    report = _run(_task(source), Honest)
    assert report.passed and report.findings == []
    used = [r["dist"] for r in report.rounds]
    # "uniform" would repeat the task's own torch.rand inputs; the scale rounds keep their signs.
    assert set(used) == {"default", "large", "tiny"} and len(used) == 5
    assert {n for n in report.notes if n.startswith("skipped")} == {
        f"skipped {d} inputs: the reference is not finite on them" for d in ("normal", "heavy", "negative")}


# ---- degenerate outputs and weak tasks (docs/anti-cheating.md, cheat 2) -------------------------------------------------------

TINY = '''
import torch
import torch.nn as nn

n = 256


class Model(nn.Module):
    def forward(self, x):
        return x * 1e-7


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


def test_zero_or_constant_output_inside_the_tolerance_is_degenerate_and_the_task_is_weak():
    class Zeros(nn.Module):
        def forward(self, x):
            return torch.zeros_like(x)

    class Constant(nn.Module):
        def forward(self, x):
            return torch.full_like(x, 1e-8)

    class Honest(nn.Module):
        def forward(self, x):
            return x / 1e7

    task = _task(TINY)  # outputs ~1e-7, far inside the default fp32 atol of 1e-5
    unscaled = ("default", "uniform", "normal", "heavy", "negative")
    for cls in (Zeros, Constant):
        report = _run(task, cls, distributions=unscaled)
        assert "degenerate-output" in report.flags and "mismatch" not in report.flags, report.findings
        assert not report.passed and "weak-task" in report.flags
        # Inputs 1e3 times larger bring the outputs to ~1e-4, beyond atol: a mismatch as well.
        scaled = _run(task, cls)
        assert "mismatch" in scaled.flags and "large inputs" in scaled.findings[scaled.flags.index("mismatch")].detail
    honest = _run(task, Honest, distributions=unscaled)
    assert honest.passed and honest.flags == ["weak-task"]
    assert FLAGS["weak-task"].severity == "warn"
    assert any("constant passes the tolerance" in n for n in honest.notes)


def test_a_task_whose_reference_ignores_an_input_is_weak():
    source = '''
import torch
import torch.nn as nn

n = 64


class Model(nn.Module):
    def forward(self, x, y):
        return x * 2 + 1e-9 * y


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
'''

    class IgnoresY(nn.Module):
        def forward(self, x, y):
            return x * 2

    report = _run(_task(source), IgnoresY)
    assert report.passed and report.flags == ["weak-task"]
    assert "input 1" in report.findings[0].detail
    assert "weak task: the reference output does not depend on input 1" in report.notes


def test_a_strong_task_has_no_weak_task_warning(softmax):
    assert "weak-task" not in _run(softmax, HonestSoftmax, [SOFTMAX_SIZES[0]]).flags


# ---- tuples ----------------------------------------------------------------------------------------------------------

TWO_OUTPUTS = '''
import torch
import torch.nn as nn

rows = 6
cols = 40


class Model(nn.Module):
    def forward(self, x):
        return x.sum(-1), x * 2


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''


def test_tuple_outputs_are_compared_element_by_element():
    class Honest(nn.Module):
        def forward(self, x):
            return x.flip(-1).sum(-1), x + x

    class SecondWrong(nn.Module):
        def forward(self, x):
            return x.sum(-1), x * 2.001

    class OnlyOne(nn.Module):
        def forward(self, x):
            return x * 2

    task = _task(TWO_OUTPUTS)
    assert _run(task, Honest).passed
    report = _run(task, SecondWrong)
    assert report.flags == ["mismatch"] and report.findings[0].detail.split(": ", 2)[1].startswith("output 1")
    assert _run(task, OnlyOne).flags == ["wrong-type"]


# ---- failures: the candidate's and the task's ------------------------------------------------------------------------

def test_candidate_exceptions_raise_candidate_failure_with_the_stage(softmax):
    class BadInit(nn.Module):
        def __init__(self):
            super().__init__()
            raise RuntimeError("no weights")

    class BadForward(nn.Module):
        def forward(self, x):
            return helper_that_fails(x)

    with pytest.raises(correctness.CandidateFailure) as info:
        _run(softmax, BadInit)
    assert info.value.stage == "init" and isinstance(info.value.original, RuntimeError)
    with pytest.raises(correctness.CandidateFailure) as info:
        _run(softmax, BadForward)
    assert info.value.stage == "forward" and isinstance(info.value.original, ValueError)
    assert "helper_that_fails" in info.value.traceback_text and "bad shape" in info.value.traceback_text


def helper_that_fails(x):
    raise ValueError("bad shape")


def test_a_failing_reference_is_a_task_error_not_a_candidate_failure():
    source = SOFTMAX.replace("return torch.softmax(x, dim=-1)", "return torch.softmax(x, dim=3)")
    with pytest.raises(TaskError, match="the reference failed") as info:
        _run(_task(source), HonestSoftmax)
    assert "not the candidate" in str(info.value)


# ---- models and the call guard --------------------------------------------------------------------------------------

LINEAR = '''
import torch
import torch.nn as nn

n = 8
width = 16


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return self.proj(x) * self.scale


def get_inputs():
    return [torch.randn(n, width)]


def get_init_inputs():
    return [width]
'''


def test_build_candidate_loads_the_references_weights_when_created_in_another_order():
    class Reordered(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.scale = nn.Parameter(torch.randn(width))  # drawn first: different values without the copy
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            return torch.addmm(self.proj.bias, x, self.proj.weight.t()) * self.scale

    task = _task(LINEAR)
    ref = task.load()
    ref_model = build_reference(ref, {}, DEVICE, 3)
    cand = correctness.build_candidate(ref, ref_model, Reordered, {}, DEVICE, 3)
    assert torch.equal(ref_model.scale, cand.scale) and torch.equal(ref_model.proj.weight, cand.proj.weight)
    assert not ref_model.training and not cand.training
    assert _run(task, Reordered).passed


def test_call_guard_wraps_every_candidate_call_and_observes_its_output(softmax):
    seen: list[str] = []

    class Guard:
        def __enter__(self):
            seen.append("enter")
            return self

        def observe(self, out):
            seen.append("observe" if type(out) is torch.Tensor else "?")

        def __exit__(self, *exc):
            seen.append("exit")
            return False

    report = _run(softmax, HonestSoftmax, SOFTMAX_SIZES, call_guard=Guard)
    assert report.passed and seen == ["enter", "observe", "exit"] * (2 * len(report.rounds))


# ---- the error map ---------------------------------------------------------------------------------------------------

def test_error_map_is_pooled_to_64_cells_and_shows_where_the_output_is_wrong():
    task = _task(SOFTMAX, sizes={"batch_size": 100, "dim": 130})

    class LastRowOff(nn.Module):
        def forward(self, x):
            y = torch.softmax(x, dim=-1)
            y[-1] += 1e-3
            return y

    report = _run(task, LastRowOff)
    grid = report.error_map["cells"]
    assert len(grid) == 50 and len(grid[0]) == 44  # 100 x 130 max-pooled by 2 x 3
    # The map carries the output's true extent and its pooling, so the axes can name real rows and columns.
    assert (report.error_map["rows"], report.error_map["cols"], report.error_map["pool"]) == (100, 130, [2, 3])
    assert not report.rounds[report.error_map_round - 1]["ok"]  # from the worst failing round
    assert all(v > 1 for v in grid[-1]) and all(v <= 1 for row in grid[:-1] for v in row)


def test_the_error_map_is_of_the_size_asked_for_though_a_smaller_check_size_fails_worse():
    """The extra check sizes repeat on the smallest one; the map a user reads against the size they asked for comes
    from a failing round of that size even where a smaller size's round failed worse."""
    task = _task(SOFTMAX)

    class WorseWhenSmall(nn.Module):
        def forward(self, x):
            y = torch.softmax(x, dim=-1)
            y[-1] += 1e-3 if x.shape[-1] == 64 else 1.0
            return y

    report = _run(task, WorseWhenSmall, SOFTMAX_SIZES)
    assert report.error_map["cols"] == 64, report.error_map["cols"]
    assert report.rounds[report.error_map_round - 1]["size"]["dim"] == 64
    assert max(r["max_abs"] for r in report.rounds if r["size"]["dim"] == 37) > 0.5


# ---- a Triton candidate under the interpreter -----------------------------------------------------------------------

@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, 0), mask=mask)


class TritonSoftmax(nn.Module):
    writes = True

    def forward(self, x):
        y = torch.empty_like(x)
        n_cols = x.shape[1] if self.writes else 0  # a row length of 0: every store is masked off
        _softmax_rows[(x.shape[0],)](x, y, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y


class TritonWritesNothing(TritonSoftmax):
    writes = False


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the empty row's max is -inf
def test_triton_softmax_passes_and_a_kernel_that_writes_nothing_is_stale_memory(softmax):
    assert _run(softmax, TritonSoftmax, SOFTMAX_SIZES).passed
    report = _run(softmax, TritonWritesNothing, SOFTMAX_SIZES)
    assert report.flags[0] == "stale-memory", report.findings
