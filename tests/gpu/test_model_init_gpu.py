"""Models built on the GPU (`wire/model_init.py`) and GPU libraries loaded before a runner's first request
(`judge/runners/libraries.py`), on a real device: equal weights on both sides whichever way a model is built, the
host as a visible fallback, and the warm-up's seconds in the Result."""

from __future__ import annotations

import pytest
from engine_tasks import SCALED_SOFTMAX

import workbench as wb

pytestmark = pytest.mark.gpu

#: A draw with a host generator: a constructor with it only runs on the host.
HOST_DRAW = "torch.rand(dim, generator=torch.Generator().manual_seed(1))"
ON_HOST = SCALED_SOFTMAX.replace("torch.rand(dim)", HOST_DRAW)


def _task(source: str) -> wb.Task:
    return wb.Task.from_source(source, name="scaled_softmax", kernel_policy="partial")


def _candidate(source: str) -> wb.Candidate:
    return wb.Candidate(source.replace("class Model(", "class ModelNew("), language="torch")


def test_parameters_with_other_names_get_the_same_device_drawn_values():
    renamed = _candidate(SCALED_SOFTMAX.replace("self.scale", "self.gain"))
    res = wb.evaluate(_task(SCALED_SOFTMAX), renamed, device="cuda", time_it=False)
    assert res.status == "ok", res.message
    assert res.protocol["models_built_on"].startswith("cuda")  # other values would scale the softmax otherwise


def test_a_reference_that_only_builds_on_the_host_has_its_candidate_built_there_too():
    res = wb.evaluate(_task(ON_HOST), _candidate(ON_HOST.replace("self.scale", "self.gain")), device="cuda",
                      time_it=False)
    assert res.status == "ok", res.message
    assert res.protocol["models_built_on"] == "cpu"


def test_a_candidate_that_only_builds_on_the_host_is_built_there_and_said_so():
    res = wb.evaluate(_task(SCALED_SOFTMAX), _candidate(ON_HOST), device="cuda", time_it=False)
    assert res.status == "ok", res.message  # same parameter names: the reference's state is copied in
    assert any("built on the host" in note for note in res.details["notes"]), res.details["notes"]


CONV = '''
import torch
import torch.nn as nn

batch_size, channels, size = 8, 16, 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return []
'''


def test_a_conv_tasks_runner_loads_cudnn_before_its_first_request():
    task = wb.Task.from_source(CONV, name="conv_relu", kernel_policy="partial")
    res = wb.evaluate(task, _candidate(CONV), device="cuda")
    assert res.status == "ok", res.message
    assert res.protocol["runner_warmup_s"] > 0
    # Both runners warmed alike: the reference against itself reads near 1 (a library loaded inside one side's
    # timing would read far off). Not nearer than its process spread: two fresh runners timing this 48 us
    # convolution, whose launch takes longer than its work, read 0.89-1.03 apart; the noise band keeps that from
    # being called slower or faster (`verdict.noise_band`).
    assert 0.8 < res.speedup < 1.25
    assert res.speedup_verdict in ("same", "inconclusive"), (res.speedup, res.speedup_ci, res.protocol["speedup_band"])
