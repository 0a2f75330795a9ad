"""KernelBench-format files load unchanged as Tasks; sizes shrink them; broken files fail with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.errors import TaskError, UnknownNameError
from workbench.tasks.kernelbench import derived_sizes
from workbench.tasks.task import DISTRIBUTIONS, Task

HERE = Path(__file__).parent / "kernelbench"

# file stem -> (small sizes, expected input shapes at those sizes, expected output shape)
CASES = {
    "1_Square_matrix_multiplication_": ({"N": 24}, [(24, 24), (24, 24)], (24, 24)),
    "23_Softmax": ({"batch_size": 4, "dim": 100}, [(4, 100)], (4, 100)),
    "47_Sum_reduction_over_a_dimension": ({"batch_size": 2, "dim1": 5, "dim2": 7}, [(2, 5, 7)], (2, 1, 7)),
    "95_CrossEntropyLoss": ({"batch_size": 6, "num_classes": 9}, [(6, 9), (6,)], ()),
    "3_Conv2d_ReLU_BiasAdd": (
        {"batch_size": 2, "in_channels": 3, "out_channels": 4, "height": 9, "width": 7}, [(2, 3, 9, 7)], (2, 4, 7, 5)
    ),
    "1_MLP": ({"batch_size": 3, "input_size": 12, "layer_sizes": [8, 16], "output_size": 4}, [(3, 12)], (3, 4)),
    "40_LayerNorm": ({"batch_size": 2, "features": 3, "dim1": 4, "dim2": 5}, [(2, 3, 4, 5)], (2, 3, 4, 5)),
}

# Each file's real module-level constants (what an unknown-name error must list).
CONSTANTS = {
    "1_Square_matrix_multiplication_": {"N"},
    "23_Softmax": {"batch_size", "dim"},
    "47_Sum_reduction_over_a_dimension": {"batch_size", "dim1", "dim2", "reduce_dim"},
    "95_CrossEntropyLoss": {"batch_size", "num_classes", "input_shape", "dim"},
    "3_Conv2d_ReLU_BiasAdd": {"batch_size", "in_channels", "out_channels", "height", "width", "kernel_size",
                              "bias_shape"},
    "1_MLP": {"batch_size", "input_size", "layer_sizes", "output_size"},
    "40_LayerNorm": {"batch_size", "features", "dim1", "dim2"},
}


def _path(stem: str) -> Path:
    return HERE / f"{stem}.py"


def test_every_test_file_is_covered():
    assert {p.stem for p in HERE.glob("*.py")} == set(CASES) == set(CONSTANTS)


@pytest.mark.parametrize("stem", CASES)
def test_file_loads_unchanged(stem):
    task = wb.load_kernelbench(_path(stem))
    assert isinstance(task, Task)
    assert task.name == stem and task.path == str(_path(stem))
    assert task.source == _path(stem).read_text()
    assert task.dtypes == ("float32",)
    ref = task.load()
    assert set(ref.defaults) == CONSTANTS[stem]


@pytest.mark.parametrize("stem", CASES)
def test_sizes_override_shrinks_inputs_and_the_reference_runs(stem):
    sizes, input_shapes, out_shape = CASES[stem]
    task = wb.load_kernelbench(_path(stem), sizes=sizes)
    for preset in ("cpu", "gpu"):
        assert sizes.items() <= task.size(preset).items()
    ref = task.load()
    size = task.size("cpu")
    inputs = ref.make_inputs(size, seed=0)
    assert [tuple(x.shape) for x in inputs] == input_shapes
    model = ref.module.Model(*ref.init_inputs(size))
    with torch.no_grad():
        out = model(*inputs)
        out64 = model.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
    assert tuple(out.shape) == out_shape and torch.isfinite(out).all()
    assert torch.allclose(out.double(), out64, rtol=1e-4, atol=1e-4)  # the float64 reference agrees


def test_override_is_not_sticky_between_sizes():
    """Constants are reset to the file's values before each size is applied."""
    task = wb.load_kernelbench(_path("23_Softmax"), sizes={"batch_size": 4, "dim": 100})
    ref = task.load()
    assert ref.make_inputs({"batch_size": 3}, seed=0)[0].shape == (3, 16384)
    assert ref.make_inputs({"dim": 10}, seed=0)[0].shape == (16, 10)


def test_derived_constants_follow_their_sources():
    conv = wb.load_kernelbench(_path("3_Conv2d_ReLU_BiasAdd"), sizes={"out_channels": 4})
    assert conv.size("cpu")["bias_shape"] == (4, 1, 1)
    assert any("bias_shape" in note for note in conv.notes)
    ce = wb.load_kernelbench(_path("95_CrossEntropyLoss"), sizes={"num_classes": 9})
    assert ce.size("cpu")["input_shape"] == (9,)
    # An explicit value wins over the recomputed one; untouched constants are not listed.
    src = "a = 2\nb = a * 3\nc, d = b + 1, 5\ne = len('xy')\nf = e + a\ng = 7\nh = os.cpu_count()\ni = h + a\n"
    # Pure builtins count as constants (e, hence f); an arbitrary call does not (h), and lines using it stay alone.
    assert derived_sizes(src, {"a": 10}) == {"b": 30, "c": 31, "f": 12}
    assert derived_sizes(src, {"a": 10, "b": 1}) == {"c": 2, "f": 12}
    assert derived_sizes(src, {"g": 1}) == {}


def test_derived_bias_shape_survives_the_worker_spec():
    """Tasks travel to workers as JSON: a recomputed tuple arrives as a list and still builds the model."""
    task = wb.load_kernelbench(_path("3_Conv2d_ReLU_BiasAdd"),
                               sizes={"batch_size": 1, "out_channels": 5, "height": 6, "width": 6})
    again = Task.from_spec(json.loads(json.dumps(task.to_spec())))
    ref = again.load()
    size = again.size("cpu")
    out = ref.module.Model(*ref.init_inputs(size))(*ref.make_inputs(size, seed=1))
    assert out.shape == (1, 5, 4, 4)


@pytest.mark.parametrize("stem", ["23_Softmax", "3_Conv2d_ReLU_BiasAdd"])
def test_unknown_size_name_lists_the_real_constants(stem):
    with pytest.raises(TaskError) as info:
        wb.load_kernelbench(_path(stem), sizes={"batch": 4})
    message = str(info.value)
    assert "batch" in message and info.value.task == stem
    for constant in CONSTANTS[stem]:
        assert constant in message


def test_dtype_override_needs_a_dtype_constant():
    task = wb.load_kernelbench(_path("23_Softmax"), sizes={"batch_size": 2, "dim": 8, "dtype": "float16"})
    with pytest.raises(TaskError, match="dtype"):
        task.load().make_inputs(task.size("cpu"), seed=0)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_missing_model_or_get_inputs_raises(tmp_path):
    no_model = _write(tmp_path, "no_model.py", "import torch\nN = 4\ndef get_inputs():\n    return [torch.randn(N)]\n"
                      "def get_init_inputs():\n    return []\n")
    with pytest.raises(TaskError) as info:
        wb.load_kernelbench(no_model)
    assert "missing Model." in str(info.value)  # only what is missing is named

    no_inputs = _write(tmp_path, "no_inputs.py", "import torch.nn as nn\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return x\n")
    with pytest.raises(TaskError) as info:
        wb.load_kernelbench(no_inputs)
    assert "get_inputs" in str(info.value) and "get_init_inputs" in str(info.value)
    assert info.value.task == "no_inputs"


def test_syntax_error_names_the_line(tmp_path):
    text = _path("23_Softmax").read_text().replace("batch_size = 16", "batch_size = = 16")
    line = text.splitlines().index("batch_size = = 16") + 1
    broken = _write(tmp_path, "23_Softmax_broken.py", text)
    with pytest.raises(TaskError) as info:
        wb.load_kernelbench(broken, sizes={"batch_size": 2})
    assert f"line {line}" in str(info.value)


def test_unreadable_path_raises_task_error(tmp_path):
    with pytest.raises(TaskError, match="cannot read"):
        wb.load_kernelbench(tmp_path / "missing.py")


def test_name_and_extra_fields_pass_through():
    task = wb.load_kernelbench(_path("23_Softmax"), sizes={"batch_size": 2, "dim": 8}, name="softmax-kb",
                               dtypes=("float32", "float16"), description="custom")
    assert task.name == "softmax-kb" and task.dtypes == ("float32", "float16") and task.description == "custom"
    assert wb.load_kernelbench(_path("23_Softmax")).description.startswith("Applies a softmax")


# ---- input distributions --------------------------------------------------------------------------


def test_make_inputs_distributions_differ_and_keep_integer_tensors():
    task = wb.load_kernelbench(_path("95_CrossEntropyLoss"), sizes={"batch_size": 64, "num_classes": 10})
    ref = task.load()
    size = task.size("cpu")
    drawn = {dist: ref.make_inputs(size, seed=3, dist=dist) for dist in DISTRIBUTIONS}
    base_targets = drawn["default"][1]
    assert base_targets.dtype == torch.int64
    for dist, (logits, targets) in drawn.items():
        assert logits.dtype == torch.float32 and logits.shape == (64, 10)
        assert torch.equal(targets, base_targets), dist  # integer inputs are never redrawn
    names = list(DISTRIBUTIONS)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not torch.equal(drawn[a][0], drawn[b][0]), (a, b)
    # Each distribution has its character, and the same seed gives the same draw.
    assert 0 <= float(drawn["uniform"][0].min()) and float(drawn["uniform"][0].max()) < 1
    assert float((drawn["negative"][0] < 0).float().mean()) > 0.75
    assert float(drawn["heavy"][0].abs().max()) > float(drawn["normal"][0].abs().max())
    assert torch.equal(ref.make_inputs(size, seed=3, dist="heavy")[0], drawn["heavy"][0])
    assert not torch.equal(ref.make_inputs(size, seed=4, dist="heavy")[0], drawn["heavy"][0])


def test_unknown_distribution_lists_the_known_ones():
    task = wb.load_kernelbench(_path("23_Softmax"), sizes={"batch_size": 2, "dim": 8})
    with pytest.raises(UnknownNameError) as info:
        task.load().make_inputs(task.size("cpu"), seed=0, dist="cauchy")
    assert all(d in str(info.value) for d in DISTRIBUTIONS)
