"""Precision policies: the registry, JSON specs, the backend flags they set and restore, and TF32 emulated on a CPU
so a task that allows TF32 gives its native reference TF32 error there too."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import workbench as wb
from workbench.errors import TaskError, UnknownNameError
from workbench.tasks import precision
from workbench.tasks.precision import IEEE, TF32, PrecisionPolicy, applied, current, round_to_tf32
from workbench.tasks.task import Task

SRC = "import torch\nimport torch.nn as nn\nN = 8\nclass Model(nn.Module):\n    def forward(self, a, b):\n" \
      "        return a @ b\ndef get_inputs():\n    return [torch.rand(N, N), torch.rand(N, N)]\n" \
      "def get_init_inputs():\n    return []\n"


def _mantissa_bits_below_tf32(x: torch.Tensor) -> int:
    return int((x.view(torch.int32) & 0x1FFF).abs().max())


@pytest.fixture
def pytorch_defaults():
    """Start from PyTorch's own defaults (cuDNN TF32 on), and leave them as found."""
    before = current()
    precision.restore({**before, "float32_matmul_precision": "highest", "matmul_tf32": False, "cudnn_tf32": True,
                       "fp16_reduced_precision_reduction": True, "bf16_reduced_precision_reduction": True})
    yield
    precision.restore(before)


def test_registry_names_and_unknown_names():
    assert {"ieee", "tf32", "conv-tf32", "reduced-reductions", "torch-default", "fast"} <= set(precision.precisions())
    assert precision.get_precision("tf32") is TF32
    with pytest.raises(UnknownNameError, match="unknown precision policy 'tf16'.*ieee"):
        precision.get_precision("tf16")


def test_ieee_turns_every_shortcut_off_including_cudnn_tf32_and_restores(pytorch_defaults):
    with applied("ieee", "cuda") as policy:
        assert policy is IEEE
        assert current() == {"float32_matmul_precision": "highest", "matmul_tf32": False, "cudnn_tf32": False,
                             "fp16_reduced_precision_reduction": False, "bf16_reduced_precision_reduction": False}
    assert torch.backends.cudnn.allow_tf32 is True  # PyTorch's default is back
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is True


def test_tf32_policy_sets_the_flags_and_restores_them_after_an_error(pytorch_defaults):
    before = current()
    with pytest.raises(RuntimeError, match="boom"), applied(TF32, "cuda"):
        assert current()["float32_matmul_precision"] == "high"
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        raise RuntimeError("boom")
    assert current() == before


def test_spec_round_trip_through_json_and_bad_specs():
    custom = PrecisionPolicy("gemm-tf32", float32_matmul_precision="high", matmul_tf32=True)
    again = PrecisionPolicy.from_spec(json.loads(json.dumps(custom.to_spec())))
    assert again == custom and again.tf32 and not again.cudnn_tf32
    assert PrecisionPolicy.from_spec(None) is IEEE and PrecisionPolicy.from_spec("tf32") is TF32
    with pytest.raises(TaskError, match="unknown keys colour"):
        PrecisionPolicy.from_spec({"name": "x", "colour": 1})
    with pytest.raises(TaskError, match="set matmul_tf32=True"):
        PrecisionPolicy("odd", float32_matmul_precision="high")
    with pytest.raises(TaskError, match="must be one of highest, high, medium"):
        PrecisionPolicy("odd", float32_matmul_precision="low")
    with pytest.raises(TaskError, match="not int"):
        PrecisionPolicy.from_spec(3)


def test_task_carries_its_policy_to_the_worker_spec():
    task = Task.from_source(SRC, name="mm", precision="tf32", kernel_policy="partial")
    assert task.precision is TF32 and task.kernel_policy == "partial"
    again = Task.from_spec(json.loads(json.dumps(task.to_spec())))
    assert again.precision == TF32 and again.kernel_policy == "partial"
    assert Task.from_source(SRC, name="mm").precision is IEEE  # the default
    assert Task.from_spec({"name": "old", "source": SRC}).precision is IEEE  # specs written before the field
    with pytest.raises(UnknownNameError, match="precision policy"):
        Task.from_source(SRC, name="mm", precision="tf64")


def test_load_kernelbench_takes_a_precision(tmp_path):
    path = tmp_path / "mm.py"
    path.write_text(SRC)
    assert wb.load_kernelbench(path, precision="tf32").precision is TF32
    assert wb.load_kernelbench(path).precision is IEEE


def test_round_to_tf32_keeps_ten_mantissa_bits_and_special_values():
    x = torch.randn(4096) * 100
    r = round_to_tf32(x)
    assert _mantissa_bits_below_tf32(r) == 0
    rel = ((r - x).abs() / x.abs()).max()
    assert 0 < rel <= 2.0**-11
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0])
    out = round_to_tf32(special)
    assert torch.equal(out[:2], special[:2]) and torch.isnan(out[2]) and torch.equal(out[3:], special[3:])
    assert round_to_tf32(x.double()) is not None and torch.equal(round_to_tf32(x.double()), x.double())


def test_tf32_is_emulated_on_the_cpu_for_matmul_linear_and_conv():
    torch.manual_seed(0)
    a, b = torch.randn(64, 512), torch.randn(512, 32)
    exact = a @ b
    with applied("tf32", "cpu"):
        emulated = a @ b
        via_mm = torch.mm(a, b)
    assert torch.equal(emulated, round_to_tf32(a) @ round_to_tf32(b)) and torch.equal(via_mm, emulated)
    assert not torch.equal(emulated, exact)
    with applied("ieee", "cpu"):
        assert torch.equal(a @ b, exact)  # IEEE: nothing rounded
    lin = nn.Linear(512, 16)
    x = torch.randn(8, 3, 10, 10)
    w = torch.randn(4, 3, 3, 3)
    with applied("tf32", "cpu"), torch.no_grad():
        assert torch.equal(lin(a), F.linear(round_to_tf32(a), round_to_tf32(lin.weight), lin.bias))
        assert torch.equal(F.conv2d(x, w), torch.conv2d(round_to_tf32(x), round_to_tf32(w)))
    with applied("conv-tf32", "cpu"):
        assert torch.equal(a @ b, exact)  # only convolutions are in TF32 under this policy
    assert torch.equal(a @ b, exact)  # and nothing stays rounded afterwards
