"""KernelBench-format files load unchanged as Tasks; sizes shrink them; broken files fail with clear errors."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.errors import TaskError, UnknownNameError
from workbench.tasks.kernelbench import derived_sizes, detect_level, reference_as_candidate
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
    assert {p.stem for p in HERE.glob("*.py")} == set(CASES) == set(CONSTANTS)  # level folders: tested below


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
    for dist, (logits, targets) in drawn.items():
        assert logits.dtype == torch.float32 and logits.shape == (64, 10)
        # Integer draws are never rerouted: class indices keep their dtype and range in every distribution.
        assert targets.dtype == torch.int64 and 0 <= int(targets.min()) and int(targets.max()) < 10, dist
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


# ---- the problems written for these tests (tests/kernelbench/level1, level2) -------------------------------

LEVELS = {1: sorted((HERE / "level1").glob("*.py")), 2: sorted((HERE / "level2").glob("*.py"))}
PROBLEMS = LEVELS[1] + LEVELS[2]


def _problem(level: int, prefix: str) -> Path:
    return next(p for p in LEVELS[level] if p.name.startswith(f"{prefix}_"))


def test_problem_set_covers_the_kinds_of_workload_it_claims():
    assert len(PROBLEMS) >= 20 and len(LEVELS[2]) >= 4
    text = {p.name: p.read_text() for p in PROBLEMS}
    for needle in ("bmm", "b.T", "nn.Conv2d", "nn.ConvTranspose2d", "nn.LayerNorm", "nn.BatchNorm2d", "nn.GroupNorm",
                   "nn.InstanceNorm2d", "torch.sum", ".mean(", "torch.max", "torch.argmax", "torch.cumsum",
                   "log_softmax", "torch.softmax", "F.mish", "F.elu", "nn.MaxPool2d", "nn.AvgPool1d", "smooth_l1_loss",
                   "cosine_similarity", "masked_fill", "torch.diag"):
        assert any(needle in t for t in text.values()), needle
    expressions = 0
    for path in PROBLEMS:
        tree = ast.parse(path.read_text())
        names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names, path.name
        expressions += sum(isinstance(n, ast.Assign) and isinstance(n.value, ast.BinOp) for n in tree.body)
    assert expressions >= 8  # sizes written as expressions, as KernelBench writes many of its own


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_problem_loads_with_its_level_policy_and_fits_a_cpu(path):
    task = wb.load_kernelbench(path, fit="cpu")
    level = int(path.parent.name[-1])
    assert task.kernel_policy == ("strict" if level == 1 else "partial")
    assert task.precision.name == "ieee" and f"KernelBench level {level}" in task.notes[0]
    assert task.size("gpu") == {}  # the file's own sizes on a GPU
    fit_note = next(n for n in task.notes if n.startswith("fit=cpu"))
    ref = task.load()
    size = task.size("cpu")
    inputs = ref.make_inputs(size, seed=0)
    elements = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
    assert 0 < elements <= 1 << 16, (path.name, size)
    model = ref.module.Model(*ref.init_inputs(size)).eval()
    with torch.no_grad():
        out = model(*inputs)
    assert out.numel() <= 1 << 16 and bool(torch.isfinite(out.double()).all())
    big = ref.defaults
    for name, value in size.items():
        assert f"{name} {big[name]!r}->{value!r}" in fit_note


def test_fit_shrinks_sizes_written_as_expressions_and_keeps_derived_ones_consistent():
    task = wb.load_kernelbench(_problem(1, "1"), fit="cpu")  # M = 1024 * 2, K = 4096, N = 2 * M
    size = task.size("cpu")
    assert size["M"] == 32 and size["K"] == 32 and size["N"] == 2 * size["M"]
    wide = wb.load_kernelbench(_problem(1, "16"), fit="cpu")  # dim = 16384 * 4
    assert wide.size("cpu")["dim"] == 32
    half = wb.load_kernelbench(_problem(1, "6"), fit="cpu")  # out_channels = in_channels // 2
    s = half.size("cpu")
    assert s["out_channels"] == s["in_channels"] // 2
    shape = wb.load_kernelbench(_problem(1, "7"), fit="cpu").size("cpu")  # normalized_shape = (rows, cols)
    assert shape["normalized_shape"] == (shape["rows"], shape["cols"])


def test_fit_keeps_kernel_sizes_windows_and_groups_valid():
    conv = wb.load_kernelbench(_problem(1, "5"), fit="cpu").size("cpu")
    assert "kernel_size" not in conv and "stride" not in conv and "padding" not in conv  # never touched
    pool = wb.load_kernelbench(_problem(1, "19"), fit="cpu")
    out = pool.load().module.Model(3, 2, 1, 2)(pool.load().make_inputs(pool.size("cpu"), seed=0)[0])
    assert min(out.shape[-2:]) >= 1
    gn = wb.load_kernelbench(_problem(1, "9"), fit="cpu").size("cpu")
    assert gn["num_channels"] % 8 == 0 and gn["num_channels"] // 8 >= 4  # 8 groups of at least 4 channels
    attn = wb.load_kernelbench(_problem(2, "5"), fit="cpu").size("cpu")
    assert attn["embed_dim"] % 12 == 0 and attn["embed_dim"] // 12 >= 4  # 12 heads of at least 4 dimensions


def test_fit_with_explicit_sizes_pins_them_and_recomputes_from_them():
    task = wb.load_kernelbench(_problem(1, "1"), sizes={"M": 8}, fit="cpu")
    assert task.size("cpu")["M"] == 8 and task.size("cpu")["N"] == 16
    assert task.size("gpu") == {"M": 8, "N": 16}  # explicit sizes apply on every device, derived ones follow


def test_fit_keeps_sizes_the_model_ties_together(tmp_path):
    """The batch must equal the feature count here (a broadcast in forward): shrunk alone, it breaks the model."""
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, w):\n"
           "        return (x * w).sum(1)\n\nbatch_size = 4096\nfeatures = (4096,)\n\ndef get_inputs():\n"
           "    return [torch.rand(batch_size, *features), torch.rand(batch_size)]\n\n"
           "def get_init_inputs():\n    return []\n")
    size = wb.load_kernelbench(_write(tmp_path, "tied.py", src), fit="cpu").size("cpu")
    assert size["batch_size"] == size["features"][0] <= 32


def test_fit_errors_are_clear(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown fit 'phone'; known fits: cpu"):
        wb.load_kernelbench(_problem(1, "17"), fit="phone")
    missing = _write(tmp_path, "needs_pkg.py", "import not_a_package_here\nimport torch.nn as nn\nN = 4096\n"
                     "class Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
                     "def get_init_inputs():\n    return []\n")
    with pytest.raises(TaskError, match="could not be imported to fit its sizes.*not_a_package_here"):
        wb.load_kernelbench(missing, fit="cpu")
    broken = _write(tmp_path, "broken.py", "import torch\nimport torch.nn as nn\nN = 4096\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x.view(7, -1, 3)\ndef get_inputs():\n"
                    "    return [torch.rand(N)]\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(TaskError, match="found no size at which the reference runs"):
        wb.load_kernelbench(broken, fit="cpu")


def test_level_and_policy_detection_and_overrides(tmp_path):
    assert detect_level("x/KernelBench/level2/12_Gemm.py") == 2 and detect_level("x/12_Gemm.py") is None
    plain = wb.load_kernelbench(_path("23_Softmax"))
    assert plain.kernel_policy == "strict" and not any("level" in n for n in plain.notes)
    assert wb.load_kernelbench(_path("23_Softmax"), level=3).kernel_policy == "partial"
    assert wb.load_kernelbench(_problem(2, "1"), kernel_policy="strict").kernel_policy == "strict"
    with pytest.raises(TaskError, match="unknown kernel policy 'lenient'"):
        wb.load_kernelbench(_path("23_Softmax"), kernel_policy="lenient")
    with pytest.raises(TaskError, match="level must be a KernelBench level"):
        wb.load_kernelbench(_path("23_Softmax"), level=0)


def test_reference_as_candidate_renames_every_use_of_model():
    task = wb.load_kernelbench(_path("3_Conv2d_ReLU_BiasAdd"))
    cand = reference_as_candidate(task)
    assert cand.language == "torch" and "super(ModelNew, self)" in cand.source and "class ModelNew(" in cand.source
    assert not re.search(r"\bModel\b", cand.source)


def test_a_triton_candidate_whose_class_is_named_model_is_evaluated(tmp_path):
    """Published KernelBench solutions often keep the reference's class name; the loader takes Model when there
    is no ModelNew, and the static checks treat it as the candidate's own class."""
    task = wb.load_kernelbench(_problem(1, "18"), fit="cpu")
    src = ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def elu_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):\n"
           "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
           "    x = tl.load(x_ptr + offs, mask=mask)\n"
           "    tl.store(y_ptr + offs, tl.where(x > 0, x, alpha * (tl.exp(x) - 1.0)), mask=mask)\n\n"
           "class Model(nn.Module):\n    def __init__(self, alpha):\n        super(Model, self).__init__()\n"
           "        self.alpha = alpha\n\n    def forward(self, x):\n        x = x.contiguous()\n"
           "        y = torch.empty_like(x)\n"
           "        elu_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), self.alpha, BLOCK=128)\n"
           "        return y\n")
    result = wb.evaluate(task, wb.Candidate(source=src, language="triton"), device="cpu", time_it=False)
    assert result.status == "ok", result.message
    no_class = src.replace("class Model(", "class Elu(").replace("super(Model", "super(Elu")
    missing = wb.evaluate(task, wb.Candidate(source=no_class, language="triton"), device="cpu", time_it=False)
    assert missing.status == "compile_error" and "defines no ModelNew (or" in missing.message and "Elu" in missing.message


def test_kwb_eval_fit_cpu(tmp_path, capsys):
    from workbench.cli.main import main

    cand = _write(tmp_path, "cand.py", reference_as_candidate(wb.load_kernelbench(_problem(1, "17"))).source)
    code = main(["eval", str(cand), "--task", str(_problem(1, "17")), "--fit", "cpu", "--device", "cpu",
                 "--language", "torch", "--no-time", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "ok" and out["size"] == {"batch_size": 4, "dim": 32}
    assert main(["eval", str(cand), "--task", "softmax", "--fit", "cpu", "--device", "cpu"]) != 0
    assert "--fit applies to KernelBench files" in capsys.readouterr().err


_GLOBAL_SIZED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Sizes its state from the module's `batch_size` in __init__, as several KernelBench problems do."""

    def __init__(self, hidden_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.mix = nn.Linear(2 * hidden_size, hidden_size)

    def forward(self, x):
        return torch.tanh(self.mix(torch.cat((x, self.hidden.to(x.device)), dim=1)))


batch_size = 64
hidden_size = 32


def get_inputs():
    return [torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [hidden_size]
'''


def test_a_candidate_sized_from_module_constants_follows_a_non_default_size(tmp_path):
    # The candidate is a copy of the reference: its module-level `batch_size` must follow the size being judged
    # (a sweep point, or a size shrunk to fit the CPU), as the reference's does, or its __init__ builds state of
    # the wrong shape.
    path = tmp_path / "1_GlobalSized.py"
    path.write_text(_GLOBAL_SIZED)
    task = wb.load_kernelbench(path)
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu", size={"batch_size": 8})
    assert res.status == "ok", res.message
    assert res.size["batch_size"] == 8



def test_a_size_asked_for_is_the_only_size_checked_of_a_file_without_presets():
    """A KernelBench file's own size (`{}`) may not fit the machine a smaller size was asked for on (a 6 GiB softmax
    on a laptop): the explicit size is checked alone; a task's presets stay beside it where it has some."""
    from workbench.eval.evaluate import _check_sizes

    task = wb.load_kernelbench(_path("23_Softmax"))
    assert task.check_sizes("cpu") == [{}]
    assert _check_sizes(task, {"batch_size": 8, "dim": 64}, "cpu", explicit=True) == [{"batch_size": 8, "dim": 64}]
    assert _check_sizes(task, {}, "cpu", explicit=False) == [{}]
    builtin = wb.get_task("softmax")
    asked = {**builtin.size(None, "cpu"), "dtype": "float32"}
    sizes = _check_sizes(builtin, asked, "cpu", explicit=True)
    assert sizes[0] == asked and len(sizes) > 1 and all(sizes)
