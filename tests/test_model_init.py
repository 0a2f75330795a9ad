"""Where models are built (`wire/model_init.py`) and which GPU libraries a runner loads early
(`judge/runners/libraries.py`). The device build itself runs on a GPU (tests/gpu/test_model_init_gpu.py); here the
meta device stands in for it, which the same `torch.device` mechanism serves."""

from __future__ import annotations

import pytest
import torch
from engine_tasks import SCALED_SOFTMAX
from redteam.attacks import kernel, softmax_task

import workbench as wb
from workbench.eval.judge.runners.libraries import libraries_for
from workbench.eval.wire import model_init


def test_a_model_is_built_where_it_is_asked_and_its_factories_follow():
    seeds = []
    model, place, failed = model_init.build(lambda: torch.nn.Linear(4, 3), "cuda", lambda: seeds.append(1), "meta")
    assert (place, failed) == ("meta", None)
    assert model.weight.device.type == "meta"
    assert seeds == [1]


def test_a_constructor_that_fails_on_the_device_is_built_on_the_host_reseeded():
    calls = []

    def make():
        calls.append(torch.empty(1).device.type)
        if calls[-1] == "meta":
            raise RuntimeError("Expected a 'meta' device type for generator")
        return torch.nn.Linear(2, 2)

    reseeded = []
    model, place, failed = model_init.build(make, "cuda", lambda: reseeded.append(1), "meta")
    assert place == model_init.HOST and calls == ["meta", "cpu"] and reseeded == [1, 1]
    assert isinstance(failed, RuntimeError) and model.weight.device.type == "cpu"


def test_the_host_is_the_place_off_the_gpu_and_a_host_failure_propagates():
    assert model_init.place_for("cpu") == model_init.HOST
    assert model_init.place_for("cuda:1") == "cuda:1"
    with pytest.raises(ValueError, match="broken"):
        model_init.build(lambda: (_ for _ in ()).throw(ValueError("broken")), "cpu", lambda: None)


def test_where_the_judge_built_a_model_is_remembered_per_object():
    a, b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    model_init.remember(a, "cuda")
    assert model_init.built_on(a) == "cuda" and model_init.built_on(b, "x") == "x"
    model_init.remember((1, 2), "cuda")  # not weak-referenceable: nothing recorded, nothing raised
    assert model_init.built_on((1, 2)) == model_init.HOST


@pytest.mark.parametrize(("source", "expected"), [
    ("self.conv = nn.Conv2d(3, 16, 3)", ("cuda", "cudnn")),
    ("y = F.conv_transpose3d(x, w)", ("cuda", "cudnn")),
    ("self.bn = nn.BatchNorm2d(8)", ("cuda", "cudnn")),
    ("self.fc = nn.Linear(8, 8)", ("cuda", "cublas")),
    ("return torch.bmm(a, b)", ("cuda", "cublas")),
    ("return a @ b", ("cuda", "cublas")),
    ("self.rnn = nn.LSTM(8, 8)", ("cuda", "cublas", "cudnn")),
    ("@triton.jit\ndef k(x_ptr):\n    pass\nreturn torch.softmax(x, -1)", ("cuda",)),
    ("x = y\n@torch.no_grad()\ndef f(): pass", ("cuda",)),
])
def test_a_runner_warms_the_libraries_its_sources_name(source, expected):
    assert libraries_for("cuda", source) == expected


def test_a_runner_off_the_gpu_warms_nothing():
    assert libraries_for("cpu", "self.conv = nn.Conv2d(3, 16, 3)\nreturn a @ b") == ()


def test_a_cpu_evaluation_builds_on_the_host_and_warms_nothing():
    res = wb.evaluate(softmax_task(), kernel(), device="cpu", time_it=False)
    assert res.status == "ok", res.message
    assert res.protocol["models_built_on"] == model_init.HOST
    assert "runner_warmup_s" not in res.protocol


def test_a_candidate_with_other_parameter_names_draws_the_references_weights():
    """KernelBench's rule, kept with the builds in one place: the candidate's own parameter (another name, so no
    state is copied) gets the same values as the reference's from the same seed."""
    task = wb.Task.from_source(SCALED_SOFTMAX, name="scaled_softmax", kernel_policy="partial")
    cand = SCALED_SOFTMAX.replace("class Model(", "class ModelNew(").replace("self.scale", "self.gain")
    res = wb.evaluate(task, wb.Candidate(cand, language="torch"), device="cpu", time_it=False)
    assert res.status == "ok", res.message
    other = cand.replace("torch.rand(dim)", "torch.rand(dim) + 0.5")
    bad = wb.evaluate(task, wb.Candidate(other, language="torch"), device="cpu", time_it=False)
    assert bad.status == "incorrect"


def test_the_references_state_loads_only_into_the_same_names_and_shapes():
    own = torch.nn.Linear(4, 3).state_dict()
    assert model_init.same_layout(own, torch.nn.Linear(4, 3).state_dict())
    assert not model_init.same_layout(own, torch.nn.Linear(5, 3).state_dict())  # a shape differs
    assert not model_init.same_layout(own, {"weight": own["weight"]})  # a name is missing
    assert not model_init.same_layout({}, {})  # nothing to load
