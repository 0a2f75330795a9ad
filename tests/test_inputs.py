"""Round inputs drawn through the task's own get_inputs with its random draws rerouted (workbench.tasks.reroute,
workbench.tasks.inputs): the structure get_inputs builds is kept in every distribution, values follow the seed and
the distribution, integer draws keep their range, inputs that are not random stay as they are, the rerouting ends
with the draw and touches no other thread, and `refill` writes the default inputs of a seed into existing tensors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.errors import TaskError, UnknownNameError
from workbench.tasks.distributions import DISTRIBUTIONS, REGISTRY, get_distribution
from workbench.tasks.inputs import draw_inputs
from workbench.tasks.reroute import DrawRecord, Reroute, fill_standard_

KB1 = Path(__file__).parent / "kernelbench" / "level1"
ROUNDS = [d for d in DISTRIBUTIONS if d != "default"]


def _ref(source: str, **sizes):
    task = wb.Task.from_source(source, name="inputs_test", sizes=sizes or None)
    return task.load(), task.size("cpu")


def _kb(stem: str, **sizes):
    task = wb.load_kernelbench(KB1 / f"{stem}.py", sizes=sizes)
    return task.load(), task.size("cpu")


def _source(body: str, header: str = "") -> str:
    return f'''
import torch
import torch.nn as nn
{header}
n = 24


class Model(nn.Module):
    def forward(self, *xs):
        return xs[0]


def get_inputs():
{body}


def get_init_inputs():
    return []
'''


# ---- structure is kept ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_triangles_symmetry_probability_rows_and_labels_survive_every_distribution(dist):
    lower, size = _kb("24_Lower_triangular_matmul", n=40)
    a, b = lower.make_inputs(size, seed=5, dist=dist)
    assert torch.equal(a, a.tril()) and torch.equal(b, b.tril()) and bool((a.tril() != 0).any())
    sym, size = _kb("25_Symmetric_matmul", n=40)
    a, b = sym.make_inputs(size, seed=5, dist=dist)
    assert torch.equal(a, a.T) and torch.equal(b, b.T)
    kl, size = _kb("27_KL_divergence_of_softmax_rows", batch_size=8, classes=64)
    predictions, targets = kl.make_inputs(size, seed=5, dist=dist)
    for rows in (predictions, targets):
        assert bool((rows >= 0).all()) and torch.allclose(rows.sum(-1), torch.ones(8), atol=1e-5)
    hinge, size = _kb("28_Hinge_loss_signed_rows", batch_size=64, features=16)
    _, labels = hinge.make_inputs(size, seed=5, dist=dist)
    assert set(labels.unique().tolist()) == {-1.0, 1.0} and labels.shape == (64, 1)


def test_each_distribution_has_its_character_on_a_uniform_task():
    ref, size = _kb("24_Lower_triangular_matmul", n=64)
    drawn = {d: ref.make_inputs(size, seed=3, dist=d)[0] for d in DISTRIBUTIONS}
    lower = {d: x[torch.ones(64, 64, dtype=torch.bool).tril()] for d, x in drawn.items()}  # the drawn half
    assert 0 <= float(lower["default"].min()) and float(lower["default"].max()) < 1
    assert 0 <= float(lower["uniform"].min()) and float(lower["uniform"].max()) < 1
    assert abs(float(lower["normal"].mean())) < 0.2 and 0.8 < float(lower["normal"].std()) < 1.2
    assert float(lower["heavy"].abs().max()) > float(lower["normal"].abs().max())
    assert float(lower["heavy"].abs().max()) <= 50
    assert float((lower["negative"] < 0).float().mean()) > 0.8 and float(lower["negative"].min()) >= -3.5
    assert 100 < float(lower["large"].max()) < 1000 and float(lower["large"].min()) >= 0
    assert 0 < float(lower["tiny"].max()) < 1e-3
    for i, a in enumerate(DISTRIBUTIONS):
        for b in DISTRIBUTIONS[i + 1:]:
            assert not torch.equal(drawn[a], drawn[b]), (a, b)


def test_scale_rounds_multiply_the_tasks_own_draws():
    """"large" and "tiny" are the task's own draws (under their own seed) times 1e3 and 1e-3: a softmax without the
    max subtraction overflows on the first, the structure is the task's."""
    source = _source("    return [torch.randn(n, n) * 3 + 1]")
    ref, size = _ref(source)
    large = ref.make_inputs(size, seed=2, dist="large")[0]
    assert float(large.abs().max()) > 88 * 10
    with torch.random.fork_rng():
        torch.manual_seed(get_distribution("large").seed(2))
        own = torch.randn(24, 24) * 1e3 * 3 + 1  # the draw is scaled, the arithmetic after it is the task's
    assert torch.allclose(large, own)


def test_parameters_of_in_place_draws_locate_and_scale_the_rerouted_values():
    source = _source("    a = torch.empty(n, n).uniform_(-2, 6)\n    b = torch.empty(n).normal_(5, 0.1)\n"
                     "    c = torch.normal(torch.full((n,), 100.0), 2.0)\n    return [a, b, c]")
    ref, size = _ref(source)
    a, b, c = ref.make_inputs(size, seed=1, dist="uniform")
    assert -2 <= float(a.min()) and float(a.max()) < 6 and float(a.max()) > 4  # a + (b - a) * U
    a, b, c = ref.make_inputs(size, seed=1, dist="negative")
    assert float(a.max()) <= -2 + 8 * 0.5 and float(a.min()) >= -2 - 8 * 3.5  # a + (b - a) * (-4U + 0.5)
    assert 5 - 0.35 <= float(b.min()) and float(b.max()) <= 5 + 0.05
    assert 100 - 7 <= float(c.min()) and float(c.max()) <= 101


def test_integer_and_discrete_draws_keep_their_range_and_follow_the_seed():
    source = _source("    labels = torch.randint(3, 7, (n * 8,))\n    mask = torch.rand(n) > 0.5\n"
                     "    perm = torch.randperm(n)\n    bits = torch.empty(n).bernoulli_(0.5)\n"
                     "    return [labels, mask, perm, bits]")
    ref, size = _ref(source)
    for dist in DISTRIBUTIONS:
        record = DrawRecord()
        labels, mask, perm, bits = ref.make_inputs(size, seed=4, dist=dist, record=record)
        assert labels.dtype == torch.int64 and 3 <= int(labels.min()) and int(labels.max()) <= 6
        assert torch.equal(perm.sort().values, torch.arange(24)) and set(bits.unique().tolist()) <= {0.0, 1.0}
        assert mask.dtype == torch.bool
        if not get_distribution(dist).untouched:
            assert record.kept == ["randint", "randperm", "bernoulli_"] and record.rerouted == ["rand"]
    first = ref.make_inputs(size, seed=4, dist="normal")[0]
    assert not torch.equal(first, ref.make_inputs(size, seed=5, dist="normal")[0])  # values change with the seed


def test_same_seed_same_values_and_the_default_is_the_tasks_own_code():
    ref, size = _kb("26_Scaled_MSE_loss", batch_size=4, features=8)
    for dist in DISTRIBUTIONS:
        first = ref.make_inputs(size, seed=11, dist=dist)
        again = ref.make_inputs(size, seed=11, dist=dist)
        other = ref.make_inputs(size, seed=12, dist=dist)
        assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True)), dist
        assert not torch.equal(first[1], other[1]), dist
    with torch.random.fork_rng():
        torch.manual_seed(11)
        scale = torch.rand(())
        own = [scale * torch.rand(4, 8), torch.rand(4, 8)]
    assert all(torch.equal(x, y) for x, y in zip(ref.make_inputs(size, seed=11), own, strict=True))


def test_inputs_that_are_not_random_keep_their_values():
    source = _source("    return [torch.arange(n, dtype=torch.float32).reshape(4, 6), torch.ones(n) * 0.5, 3.0]")
    ref, size = _ref(source)
    base = ref.make_inputs(size, seed=0)
    for dist in DISTRIBUTIONS:
        record = DrawRecord()
        inputs = ref.make_inputs(size, seed=9, dist=dist, record=record)
        assert torch.equal(inputs[0], base[0]) and torch.equal(inputs[1], base[1]) and inputs[2] == 3.0
        assert record.rerouted == [] and record.repeats_default(get_distribution(dist))


def test_a_distribution_that_repeats_the_tasks_own_is_recognised():
    record = DrawRecord()
    ref, size = _kb("24_Lower_triangular_matmul", n=8)
    ref.make_inputs(size, seed=0, dist="uniform", record=record)
    assert record.families == {"uniform"} and record.repeats_default(REGISTRY["uniform"])
    assert not record.repeats_default(REGISTRY["normal"]) and not record.repeats_default(REGISTRY["large"])


def test_dtype_shape_grad_and_complex_draws_are_kept():
    source = _source("    return [torch.randn(n, dtype=torch.float16), torch.rand(2, 3, requires_grad=True),\n"
                     "            torch.randn(5, dtype=torch.complex64), torch.rand_like(torch.zeros(3, 2, "
                     "dtype=torch.float64))]")
    ref, size = _ref(source)
    half, grad, cplx, like = ref.make_inputs(size, seed=0, dist="heavy")
    assert half.dtype == torch.float16 and grad.requires_grad and grad.shape == (2, 3)
    assert cplx.dtype == torch.complex64 and bool((cplx.imag != 0).all())
    assert like.dtype == torch.float64 and like.shape == (3, 2)


def test_draws_bound_before_the_call_and_initialisers():
    """`from torch import rand` at the top of a file still goes through the mode; nn.init.normal_ is rerouted, the
    fan-scaled initialisers run as written."""
    source = _source("    w = torch.empty(16, 16)\n    nn.init.kaiming_uniform_(w)\n"
                     "    return [rand(4, 4), nn.init.normal_(torch.empty(n), 0.0, 1.0), w]", "from torch import rand")
    ref, size = _ref(source)
    record = DrawRecord()
    x, y, w = ref.make_inputs(size, seed=0, dist="negative", record=record)
    assert float((x < 0).float().mean()) > 0.5 and float((y < 0).float().mean()) > 0.5
    assert record.rerouted == ["rand", "normal_"] and record.kept == ["kaiming_uniform_"]
    assert float(w.abs().max()) <= (6 / 16) ** 0.5  # kaiming's own bound


def test_fill_of_a_non_contiguous_view_and_heavy_is_bounded():
    base = torch.zeros(6, 8)
    fill_standard_(base.T, "heavy")
    assert bool((base != 0).all()) and float(base.abs().max()) <= 50
    with pytest.raises(ValueError, match="no standard draw"):
        fill_standard_(torch.empty(3), "cauchy-ish")


# ---- the rerouting is local -------------------------------------------------------------------------------------

def test_rerouting_ends_with_the_draw_and_leaves_the_rng_as_it_was():
    ref, size = _kb("24_Lower_triangular_matmul", n=16)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    ref.make_inputs(size, seed=1, dist="negative")
    assert torch.equal(torch.get_rng_state(), state)
    x = torch.rand(10_000)
    assert 0 <= float(x.min()) and float(x.max()) < 1  # not rerouted any more
    assert torch.overrides._get_current_function_mode_stack() == []


def test_rerouting_ends_when_get_inputs_raises():
    source = _source("    x = torch.rand(n)\n    raise RuntimeError('broken task')")
    ref, size = _ref(source)
    with pytest.raises(RuntimeError, match="broken task"):
        ref.make_inputs(size, seed=0, dist="negative")
    assert torch.overrides._get_current_function_mode_stack() == []
    assert 0 <= float(torch.rand(1000).min())


def test_another_thread_drawing_meanwhile_is_not_rerouted():
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, torch.Tensor] = {}

    def get_inputs():
        x = torch.rand(1000)
        entered.set()
        release.wait(10)
        return [x]

    def other():
        entered.wait(10)
        seen["other"] = torch.rand(100_000)
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    rerouted = draw_inputs(get_inputs, "negative", seed=0)[0]
    thread.join(10)
    assert float((rerouted < 0).float().mean()) > 0.8
    assert 0 <= float(seen["other"].min()) and float(seen["other"].max()) < 1


def test_the_mode_can_be_used_directly_and_records_what_it_changed():
    record = DrawRecord()
    with Reroute(get_distribution("tiny"), record):
        x = torch.rand(100)
        k = torch.randint(0, 5, (10,))
    assert float(x.max()) < 1e-3 and int(k.max()) <= 4
    assert record.rerouted == ["rand"] and record.kept == ["randint"]


# ---- names ------------------------------------------------------------------------------------------------------

def test_unknown_distribution_names_are_refused_with_the_known_ones():
    ref, size = _kb("24_Lower_triangular_matmul", n=8)
    with pytest.raises(UnknownNameError) as info:
        ref.make_inputs(size, seed=0, dist="gaussian")
    assert all(name in str(info.value) for name in DISTRIBUTIONS)
    with pytest.raises(UnknownNameError, match="unknown distribution 'cauchy'"):
        wb.Task.from_source(_source("    return [torch.rand(n)]"), distributions=("default", "cauchy"))
    assert DISTRIBUTIONS[:5] == ("default", "uniform", "normal", "heavy", "negative")  # names in stored results
    assert {"large", "tiny"} <= set(DISTRIBUTIONS)


# ---- drawing on the device, with a fallback ---------------------------------------------------------------------

def test_the_fallback_to_the_host_is_remembered_per_size_and_noted():
    """The decision logic of LoadedReference._on_device, with a draw that fails on the device."""
    ref, size = _kb("24_Lower_triangular_matmul", n=8)
    tried: list[str] = []
    notes: list[str] = []

    def draw(where: str):
        tried.append(where)
        if where != "cpu":
            raise RuntimeError("Expected all tensors to be on the same device")
        return "drawn"

    assert ref._on_device(size, "cuda:0", notes.append, draw) == "drawn"
    assert ref._on_device(size, "cuda:0", notes.append, draw) == "drawn"
    assert tried == ["cuda:0", "cpu", "cpu"]  # the device is not retried at this size
    assert len(notes) == 2 and "drawn on the CPU and copied to cuda:0" in notes[0] and "same device" in notes[0]
    assert ref._on_device({"n": 9}, "cuda:0", None, draw) == "drawn" and tried[-2:] == ["cuda:0", "cpu"]


def test_a_task_broken_everywhere_raises_its_own_error():
    ref, size = _kb("24_Lower_triangular_matmul", n=8)

    def draw(where: str):
        raise ValueError(f"broken on {where}")

    with pytest.raises(ValueError, match="broken on cpu"):
        ref._on_device(size, "cuda", None, draw)
    assert ref._drawn_on_host == {}


@pytest.mark.gpu
def test_a_task_that_mixes_in_a_cpu_tensor_is_drawn_on_the_host_and_moved():
    source = _source("    return [torch.rand(n) + torch.ones(n, device='cpu')]")
    ref, size = _ref(source)
    notes: list[str] = []
    x = ref.make_inputs(size, seed=0, device="cuda", dist="normal", note=notes.append)[0]
    assert x.device.type == "cuda" and notes and "drawn on the CPU" in notes[0]


@pytest.mark.gpu
def test_inputs_are_drawn_on_the_gpu_with_their_structure():
    ref, size = _kb("24_Lower_triangular_matmul", n=256)
    notes: list[str] = []
    for dist in DISTRIBUTIONS:
        a, b = ref.make_inputs(size, seed=1, device="cuda", dist=dist, note=notes.append)
        assert a.device.type == "cuda" and torch.equal(a, a.tril()) and torch.equal(b, b.tril())
    assert notes == []


# ---- refill -----------------------------------------------------------------------------------------------------

def _assert_refilled(ref, size, device="cpu"):
    targets = ref.make_inputs(size, seed=1, device=device)
    pointers = [t.data_ptr() for t in targets if isinstance(t, torch.Tensor)]
    ref.refill(targets, size, seed=2, device=device)
    want = ref.make_inputs(size, seed=2, device=device)
    assert [t.data_ptr() for t in targets if isinstance(t, torch.Tensor)] == pointers
    for got, new in zip(targets, want, strict=True):
        assert torch.equal(got, new) if isinstance(got, torch.Tensor) else got == new


@pytest.mark.parametrize("stem", ["24_Lower_triangular_matmul", "25_Symmetric_matmul", "26_Scaled_MSE_loss",
                                  "27_KL_divergence_of_softmax_rows", "28_Hinge_loss_signed_rows"])
def test_refill_writes_the_default_inputs_of_a_seed_into_the_same_tensors(stem):
    ref, _ = _kb(stem)
    size = {k: 16 for k in ref.defaults if k in ("n", "batch_size", "features", "classes")}
    _assert_refilled(ref, size)


def test_refill_draws_straight_into_a_target_and_copes_with_swapped_outputs():
    source = _source("    a = torch.rand(n)\n    b = torch.randn(n)\n    DRAWN.append((a.data_ptr(), b.data_ptr()))\n"
                     "    return [b, a, 2.5]", "DRAWN = []")
    ref, size = _ref(source)
    targets = ref.make_inputs(size, seed=1)
    ref.refill(targets, size, seed=7)
    # Both draws went into the two targets (first fitting target first); the swap is undone through a copy.
    assert ref.module.DRAWN[-1] == (targets[0].data_ptr(), targets[1].data_ptr())
    want = ref.make_inputs(size, seed=7)
    assert torch.equal(targets[0], want[0]) and torch.equal(targets[1], want[1]) and targets[2] == 2.5
    _assert_refilled(_ref(_source("    return [torch.rand(n), torch.rand(3, n)]"))[0], {})


def test_refill_refuses_targets_of_another_size():
    ref, size = _kb("24_Lower_triangular_matmul", n=16)
    targets = ref.make_inputs({"n": 8}, seed=0)
    with pytest.raises(TaskError, match="keep their shapes"):
        ref.refill(targets, size, seed=1)
    with pytest.raises(TaskError, match="returned 2 inputs where 3"):
        ref.refill(targets + [torch.zeros(1)], size, seed=1)


@pytest.mark.gpu
def test_refill_on_the_gpu_matches_make_inputs():
    ref, _ = _kb("25_Symmetric_matmul")
    _assert_refilled(ref, {"n": 512}, device="cuda")
    _assert_refilled(_ref(_source("    return [torch.rand(n), torch.randn(3, n)]"))[0], {}, device="cuda")


def test_seeding_repeats_the_host_draws_and_seeds_cuda_only_where_a_device_may_exist(monkeypatch):
    """`seed_all` before every draw and timed call: the same seed, the same host draws; where no CUDA device can
    exist (torch built without CUDA, or every device hidden) nothing is handed to CUDA's lazy seeding, which formats a
    stack trace per call; where one may, every device is seeded as `torch.manual_seed` would."""
    from workbench import seeding

    seeding.seed_all(7)
    first = torch.randn(4)
    seeding.seed_all(7)
    assert torch.equal(first, torch.randn(4))
    handed: list[int] = []
    monkeypatch.setattr(seeding, "_seed_cuda", handed.append)
    monkeypatch.setattr(seeding, "_CUDA_BUILT", True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seeding.seed_all(3)
    assert handed == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    seeding.seed_all(3)
    assert handed == [3]
    monkeypatch.setattr(seeding, "_CUDA_BUILT", False)
    seeding.seed_all(4)
    assert handed == [3]


@pytest.mark.gpu
def test_seeding_repeats_the_gpu_draws():
    from workbench.seeding import seed_all

    seed_all(5)
    first = torch.randn(64, device="cuda")
    seed_all(5)
    assert torch.equal(first, torch.randn(64, device="cuda"))
