"""Built-in task library: registry, references at CPU sizes, work formulas, tolerances that tell precisions
apart, and each task's reference Triton solution run in-process (interpreter on CPU) against float64."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys

import pytest
import torch

import workbench as wb
from workbench.errors import UnknownNameError
from workbench.tasks import BUILTIN, MARKER, reference_source, solution_path
from workbench.tasks.task import Task, Tolerance

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRETED = DEVICE == "cpu"
BF16_SKIP = "native bf16 arithmetic (adds, tl.dot) is wrong in Triton's interpreter; bf16 solutions are checked on a GPU"


def _declared_dtype(ref, size: dict) -> torch.dtype:
    name = size.get("dtype")
    return getattr(torch, name) if name else ref.defaults["dtype"]


def _float64(xs: list) -> list:
    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]


def _cast(xs: list, dtype: torch.dtype) -> list:
    return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]


def _excess(out: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> float:
    """max |out - want| / (atol + rtol |want|): <= 1 passes the task's tolerance."""
    err = (out.double() - want).abs()
    return float((err / (tol.atol + tol.rtol * want.abs())).max())


def _reference_f64(ref, size: dict, inputs: list) -> torch.Tensor:
    device = next(x.device for x in inputs if isinstance(x, torch.Tensor))
    model = ref.module.Model(*ref.init_inputs(size)).double().to(device)
    with torch.no_grad():
        return model(*_float64(inputs))


# ---- registry ---------------------------------------------------------------------------------------


def test_registry_lists_every_builtin_task():
    assert set(BUILTIN) <= set(wb.tasks())
    assert len(BUILTIN) == 10
    for name in BUILTIN:
        task = wb.get_task(name)
        assert isinstance(task, Task) and task.name == name
        assert task.sizes.keys() == {"cpu", "gpu"}
        assert 2 <= len(task.sweep["cpu"]) <= 3 and 4 <= len(task.sweep["gpu"]) <= 6
        assert "float32" in task.dtypes
        assert task.flops is not None and task.bytes is not None and task.description
        assert task.solution == solution_path(name).read_text()
    assert wb.get_task("softmax") is wb.get_task("softmax")  # built once, then cached


def test_tasks_stays_callable_after_the_package_is_imported():
    importlib.import_module("workbench.tasks")  # binds the package as `workbench.tasks`, over the function

    assert sorted(wb.tasks()) == wb.tasks()
    assert set(BUILTIN) <= set(wb.tasks())
    assert wb.tasks.reference_source is reference_source


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as info:
        wb.get_task("sofmax")
    assert "softmax" in str(info.value) and "conv2d" in str(info.value)


def test_reference_source_is_the_kernelbench_part_only():
    task = wb.get_task("layernorm")
    head = reference_source(task)
    assert MARKER in task.source and MARKER not in head
    assert "def task(" in task.source and "def task(" not in head and "workbench" not in head
    # The reference part alone is a complete KernelBench file.
    alone = Task.from_source(head, name="layernorm-alone", sizes={"batch_size": 3, "dim": 5})
    ref = alone.load()
    x, w, b = ref.make_inputs(alone.size("cpu"), seed=0)
    assert x.shape == (3, 5) and w.shape == (5,) and b.shape == (5,)


def test_task_spec_round_trip_keeps_tolerances_and_sizes():
    task = wb.get_task("matmul")
    again = Task.from_spec(json.loads(json.dumps(task.to_spec())))
    assert again.source == task.source and again.sizes == task.sizes and again.sweep == task.sweep
    assert again.tolerance("float32") == Tolerance(4e-3, 2e-5)
    assert again.dtypes == ("float16", "bfloat16", "float32")


def test_references_import_in_a_fresh_process_without_triton():
    """The worker imports Task.source as the reference: it must need only torch (and no triton)."""
    code = (
        "import json, sys, workbench as wb\n"
        "from workbench.tasks.task import import_source\n"
        "out = {}\n"
        "for name in wb.tasks():\n"
        "    m = import_source(wb.get_task(name).source, 'fresh_' + name)\n"
        "    out[name] = type(m.Model(*m.get_init_inputs())).__name__\n"
        "out['triton_loaded'] = 'triton' in sys.modules\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result.pop("triton_loaded") is False
    assert set(BUILTIN) <= set(result) and set(result.values()) == {"Model"}


# ---- references at CPU sizes ------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILTIN)
def test_reference_runs_at_cpu_preset_and_sweep(name):
    task = wb.get_task(name)
    ref = task.load()
    for size in [task.size("cpu"), *task.sweep["cpu"]]:
        inputs = ref.make_inputs(size, seed=3)
        model = ref.module.Model(*ref.init_inputs(size))
        with torch.no_grad():
            out = model(*inputs)
        assert isinstance(out, torch.Tensor) and out.dtype == _declared_dtype(ref, size), (size, out.dtype)
        assert torch.isfinite(out).all(), size
        if out.numel() > 1:  # a near-constant reference could not tell right from wrong
            assert float(out.double().std()) > 1e-3 * float(out.double().abs().mean()), size
    # Every declared dtype at the CPU preset (the torch reference itself handles bf16 on CPU).
    for dtype in task.dtypes:
        size = {**task.size("cpu"), "dtype": dtype}
        inputs = ref.make_inputs(size, seed=4)
        assert all(x.dtype == getattr(torch, dtype) for x in inputs if x.is_floating_point())
        with torch.no_grad():
            out = ref.module.Model(*ref.init_inputs(size))(*inputs)
        assert out.dtype == getattr(torch, dtype) and torch.isfinite(out).all()


def test_cpu_presets_are_small_and_gpu_presets_realistic():
    gpu_flops = {}
    for name in BUILTIN:
        task = wb.get_task(name)
        ref = task.load()
        cpu = sum(x.numel() for x in ref.make_inputs(task.size("cpu"), seed=0))
        assert cpu <= 40_000, (name, cpu)
        gpu_flops[name] = task.flops(task.size("gpu"))
    assert wb.get_task("softmax").size("gpu") == {"batch_size": 8192, "dim": 8192}
    assert wb.get_task("matmul").size("gpu") == {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}
    assert gpu_flops["matmul"] == 2 * 4096**3


# ---- work formulas ----------------------------------------------------------------------------------


def test_flops_and_bytes_match_hand_counts():
    softmax = wb.get_task("softmax")
    assert softmax.flops({"batch_size": 64, "dim": 256}) == 5 * 64 * 256 == 81920
    assert softmax.bytes({"batch_size": 64, "dim": 256}) == 2 * 64 * 256 * 4 == 131072
    assert softmax.bytes({"batch_size": 64, "dim": 256, "dtype": "float16"}) == 65536
    assert softmax.flops({}) == 5 * 8192 * 8192  # missing keys fall back to the module's constants

    matmul = wb.get_task("matmul")
    assert matmul.flops({"M": 4096, "N": 4096, "K": 4096}) == 137_438_953_472  # 2 * 4096^3
    assert matmul.flops({"M": 33, "N": 65, "K": 17}) == 72_930
    # fp16 4096^3: three 4096^2 matrices of 2 bytes
    assert matmul.bytes({"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}) == 100_663_296
    assert matmul.bytes({"M": 2, "N": 3, "K": 5, "dtype": "float32"}) == (10 + 15 + 6) * 4

    layernorm = wb.get_task("layernorm")
    assert layernorm.flops({"batch_size": 64, "dim": 256}) == 7 * 64 * 256 == 114688
    # x read, y written (64*256 each), weight and bias read (256 each), fp32
    assert layernorm.bytes({"batch_size": 64, "dim": 256}) == (2 * 16384 + 512) * 4 == 133120

    vector_add = wb.get_task("vector_add")
    assert vector_add.flops({"n": 1000}) == 1000
    assert vector_add.bytes({"n": 1000}) == 12000
    assert vector_add.bytes({"n": 1000, "dtype": "bfloat16"}) == 6000

    conv = wb.get_task("conv2d")
    cpu = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 12, "width": 12}
    # 2*8*12*12 = 2304 outputs, each 4*3*3 = 36 multiply-adds (72 FLOPs) plus one bias add
    assert conv.flops(cpu) == 2304 * 72 + 2304 == 168192
    # image 2*4*144 = 1152, weight 8*36 = 288, bias 8, output 2304 values, 4 bytes each
    assert conv.bytes(cpu) == (1152 + 288 + 8 + 2304) * 4 == 15008
    # stride 2 on 10x6: outputs 5x3
    assert conv.flops({**cpu, "height": 10, "width": 6, "stride": 2}) == 2 * 8 * 15 * (72 + 1)


@pytest.mark.parametrize("name", BUILTIN)
def test_flops_agree_with_torch_counter_where_it_counts(name):
    """Where FlopCounterMode sees the work (matmul-like ops), the formula is within a small factor of it."""
    from torch.utils.flop_counter import FlopCounterMode

    task = wb.get_task(name)
    ref = task.load()
    size = task.size("cpu")
    model = ref.module.Model(*ref.init_inputs(size))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*ref.make_inputs(size, seed=0))
    counted = counter.get_total_flops()
    formula = task.flops(size)
    assert formula > 0
    if name == "matmul":
        assert formula == counted
    elif name == "conv2d":  # torch leaves out the bias adds (one per output)
        assert formula - counted == ref.module.Model(*ref.init_inputs(size))(*ref.make_inputs(size, 0)).numel()
    elif name == "attention":  # torch counts the full (non-causal) score matrix
        seq = size["seq_len"]
        assert formula == pytest.approx(counted * (seq + 1) / (2 * seq), rel=0.01)


# ---- tolerances tell precisions apart ---------------------------------------------------------------


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 to TF32's 10-bit mantissa (what a tensor-core dot does to its inputs)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("name", BUILTIN)
def test_fp32_tolerance_rejects_fp16_arithmetic(name):
    """docs/anti-cheating.md, cheat 12: the fp32 bound must fail a result computed in fp16, at CPU and sweep sizes."""
    task = wb.get_task(name)
    ref = task.load()
    tol = task.tolerance("float32")
    for size in [task.size("cpu"), task.sweep["cpu"][0]]:
        inputs = ref.make_inputs(size, seed=5)
        want = _reference_f64(ref, size, inputs)
        with torch.no_grad():
            half = ref.module.Model(*ref.init_inputs(size)).half()(*_cast(inputs, torch.float16))
        assert _excess(half, want, tol) > 2, (name, size)


@pytest.mark.parametrize("name", ["matmul", "attention", "conv2d"])
def test_fp32_tolerance_rejects_tf32_inputs(name):
    task = wb.get_task(name)
    ref = task.load()
    size = task.size("cpu")
    inputs = ref.make_inputs(size, seed=6)
    want = _reference_f64(ref, size, inputs)
    rounded = [_tf32(x) if x.is_floating_point() else x for x in inputs]
    assert _excess(_reference_f64(ref, size, rounded), want, task.tolerance("float32")) > 2


def test_softmax_fp16_bound_rejects_a_result_off_by_two():
    """Softmax outputs are ~1/dim: the default fp16 atol (1e-2) would pass nearly anything."""
    task = wb.get_task("softmax")
    ref = task.load()
    size = {**task.size("cpu"), "dtype": "float16"}
    want = _reference_f64(ref, size, ref.make_inputs(size, seed=0))
    assert _excess(want.half(), want, task.tolerance("float16")) < 1
    assert _excess((want * 2).half(), want, task.tolerance("float16")) > 1


# ---- reference Triton solutions ---------------------------------------------------------------------


def _solution(name: str):
    return importlib.import_module(f"workbench.tasks.solutions.{name}")


def _check_solution(task: Task, size: dict, seed: int, dist: str) -> float:
    ref = task.load()
    init = ref.init_inputs(size)
    inputs = ref.make_inputs(size, seed=seed, device=DEVICE, dist=dist)
    before = [x.clone() for x in inputs]
    with torch.no_grad():
        out = _solution(task.name).ModelNew(*init).to(DEVICE)(*inputs)
    want = _reference_f64(ref, size, inputs)
    assert type(out) is torch.Tensor and out.shape == want.shape
    assert out.dtype == _declared_dtype(ref, size)
    assert all(torch.equal(a, b) for a, b in zip(inputs, before, strict=True)), "solution modified its inputs"
    assert torch.isfinite(out).all()
    return _excess(out, want, task.tolerance(str(out.dtype).removeprefix("torch.")))


@pytest.mark.parametrize("name", BUILTIN)
def test_solution_matches_float64_reference(name):
    task = wb.get_task(name)
    kind = "gpu" if DEVICE == "cuda" else "cpu"
    preset, sweep = task.size(None, DEVICE), task.sweep[kind][0]
    assert _check_solution(task, preset, seed=1, dist="default") <= 1
    assert _check_solution(task, preset, seed=2, dist="heavy") <= 1
    assert _check_solution(task, sweep, seed=3, dist="negative") <= 1


@pytest.mark.parametrize("name", BUILTIN)
def test_solution_at_the_second_cpu_sweep_size(name):
    """Rows longer than one interpreter block (the looped kernels), conv2d at stride 2, other odd shapes."""
    task = wb.get_task(name)
    size = task.sweep["cpu"][1]
    assert _check_solution(task, size, seed=7, dist="uniform") <= 1


@pytest.mark.parametrize("name", BUILTIN)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_solution_low_precision(name, dtype):
    task = wb.get_task(name)
    if dtype not in task.dtypes:
        pytest.skip(f"{name} does not declare {dtype}")
    if dtype == "bfloat16" and INTERPRETED:
        assert _interpreter_bf16_is_broken(), "bf16 works in the interpreter now: check bf16 here instead"
        pytest.skip(BF16_SKIP)
    size = {**task.size("cpu"), "dtype": dtype}
    assert _check_solution(task, size, seed=8, dist="normal") <= 1


def _interpreter_bf16_is_broken() -> bool:
    """Native bf16 arithmetic (an add, a tl.dot) in a tiny kernel; True when the result is wrong."""
    import triton
    import triton.language as tl

    @triton.jit
    def probe(x_ptr, sum_ptr, dot_ptr, N: tl.constexpr):
        rows = tl.arange(0, N)
        x = tl.load(x_ptr + rows[:, None] * N + rows[None, :])
        tl.store(sum_ptr + rows[:, None] * N + rows[None, :], x + x)
        tl.store(dot_ptr + rows[:, None] * N + rows[None, :], tl.dot(x, x).to(tl.bfloat16))

    x = torch.linspace(-1, 1, 256).reshape(16, 16).to(torch.bfloat16)
    added, dotted = torch.empty_like(x), torch.empty_like(x)
    probe[(1,)](x, added, dotted, N=16)
    ok_add = torch.allclose(added.float(), 2 * x.float())
    ok_dot = torch.allclose(dotted.float(), x.float() @ x.float(), rtol=2e-2, atol=2e-2)
    return not (ok_add and ok_dot)


@pytest.mark.skipif(not INTERPRETED, reason="about the Triton interpreter")
def test_bf16_skip_reason_holds_in_the_interpreter():
    """The bf16 skips above rest on this: if the interpreter's bf16 gets fixed, this fails and they can go."""
    assert _interpreter_bf16_is_broken()
    assert "bf16" in BF16_SKIP and "interpreter" in BF16_SKIP


def test_every_solution_launches_a_triton_kernel_and_no_torch_math():
    """Honesty of the shipped solutions: a @triton.jit kernel, launched from forward; no torch math."""
    import ast

    banned = {"matmul", "mm", "bmm", "softmax", "sum", "mean", "exp", "conv2d", "layer_norm", "gelu", "erf",
              "cross_entropy", "log_softmax", "rsqrt", "scaled_dot_product_attention", "einsum", "addmm"}
    for name in BUILTIN:
        tree = ast.parse(wb.get_task(name).solution)
        kernels = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                   and any("jit" in ast.unparse(d) for d in f.decorator_list)}
        assert kernels, name
        model = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "ModelNew")
        forward = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
        launched = {ast.unparse(s.func.value) for s in ast.walk(forward)
                    if isinstance(s, ast.Call) and isinstance(s.func, ast.Subscript)}
        assert launched & kernels, (name, launched)
        calls = {c.func.attr for c in ast.walk(forward) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
        assert not calls & banned, (name, calls & banned)


def test_gelu_is_the_erf_form_not_tanh():
    task = wb.get_task("gelu")
    ref = task.load()
    size = task.size("cpu")
    x = ref.make_inputs(size, seed=0)[0]
    want = _reference_f64(ref, size, [x])
    tanh_form = torch.nn.functional.gelu(x.double(), approximate="tanh")
    assert _excess(tanh_form, want, task.tolerance("float32")) > 1
    assert math.isclose(float(want[x.double().argmax()]), float(x.max()), rel_tol=1e-3)


# ---- task policies and fields --------------------------------------------------------------------------------

def test_task_policy_fields_default_to_strict_ieee_and_builtins_declare_a_flop_bound():
    for name in BUILTIN:
        task = wb.get_task(name)
        assert task.kernel_policy == "strict" and task.precision.name == "ieee" and task.min_flops is not None
    src = wb.get_task("softmax").source
    with pytest.raises(UnknownNameError, match="kernel policy 'some'"):
        Task(name="x", source=src, kernel_policy="some")
    task = Task(name="x", source=src, kernel_policy="partial", precision="tf32", min_flops=lambda s: 1.0,
                notes=("a note",))
    again = Task.from_spec(json.loads(json.dumps(task.to_spec())))
    assert (again.kernel_policy, again.precision.name, again.notes) == ("partial", "tf32", ("a note",))
    assert again.min_flops is None  # callables stay in the caller's process, like flops and bytes
    assert "precision='tf32'" in repr(task) and "kernel_policy='partial'" in repr(task)


# ---- footprint: memory of one input set and the reference output, without allocating -------------------------

KB = __import__("pathlib").Path(__file__).parent / "kernelbench"


def test_footprint_of_gpu_sizes_without_allocating_them():
    from workbench.tasks.footprint import estimate_footprint

    task = wb.load_kernelbench(KB / "level1" / "16_LogSoftmax_wide.py")  # 256 x 65536 fp32
    fp = estimate_footprint(task, device="cuda")
    assert fp.method == "fake" and fp.input_shapes == [(256, 65536)] and fp.output_shapes == [(256, 65536)]
    assert fp.input_bytes == fp.output_bytes == 256 * 65536 * 4 and fp.parameter_bytes == 0
    assert fp.float64_output_bytes() == 2 * fp.output_bytes
    conv = estimate_footprint(wb.load_kernelbench(KB / "level2" / "1_Conv2d_BiasAdd_ReLU.py"), device="cuda")
    assert conv.input_bytes == 64 * 32 * 128 * 128 * 4 and conv.output_bytes == 64 * 64 * 128 * 128 * 4
    assert conv.parameter_bytes == (64 * 32 * 3 * 3 + 64) * 4
    small = estimate_footprint(wb.load_kernelbench(KB / "level2" / "1_Conv2d_BiasAdd_ReLU.py", fit="cpu"),
                               device="cpu")
    assert small.input_elements <= 1 << 16 and small.output_elements == 4 * 16 * 16 * 16


def test_footprint_of_a_data_dependent_output_is_unknown_but_inputs_are_known():
    from workbench.tasks.footprint import estimate_footprint

    src = ("import torch\nimport torch.nn as nn\nN = 1 << 20\nclass Model(nn.Module):\n    def forward(self, x):\n"
           "        return x[x > 0.5]\ndef get_inputs():\n    return [torch.rand(N)]\ndef get_init_inputs():\n"
           "    return []\n")
    fp = estimate_footprint(Task.from_source(src, name="masked"))
    assert fp.input_bytes == 4 << 20 and fp.output_bytes is None and fp.output_elements is None
    assert "could not be traced" in fp.note and fp.untraceable
    broken = Task.from_source(src.replace("torch.rand(N)", "torch.rand(N).numpy()"), name="numpy_inputs")
    assert estimate_footprint(broken) is None  # not even the inputs can be built without data


# ---- sizes: partial sizes keep the device's preset; every value is checked before any work -----------------

def test_a_partial_size_keeps_the_device_preset_for_the_names_it_leaves_out():
    task = wb.get_task("softmax")
    assert task.size({"dim": 64}, "cpu") == {**task.sizes["cpu"], "dim": 64}
    assert task.size({"dim": 64}, "cuda") == {**task.sizes["gpu"], "dim": 64}
    assert task.size({"dtype": "float16"}, "cpu") == {**task.sizes["cpu"], "dtype": "float16"}
    full = {"batch_size": 3, "dim": 5}
    assert task.size(full, "cuda") == full  # a whole size is taken as given
    kb = wb.load_kernelbench(KB / "23_Softmax.py")  # no presets: the file's own constants fill the rest
    assert kb.size({"dim": 8}, "cpu") == {"dim": 8}


@pytest.mark.parametrize("size, message", [
    ({"dim": "abc"}, "size dim=abc: dim must be a whole number (the task's default is 8192), e.g. dim=8192"),
    ({"batch_size": -4}, "size batch_size=-4: batch_size is a dimension and must be at least 1"),
    ({"batch_size": 0}, "size batch_size=0: batch_size is a dimension and must be at least 1"),
    ({"batch_size": True}, "size batch_size=true: batch_size must be a whole number"),
    ({"dim": 2.5}, "size dim=2.5: dim must be a whole number"),
    ({"dimm": 64}, "size: task 'softmax' has no size 'dimm' (did you mean 'dim'?); its sizes are batch_size, dim"),
    ({"dtype": "int3"}, "size dtype=int3: use one of bfloat16, float16, float32, float64"),
])
def test_a_size_the_task_cannot_use_is_refused_before_any_evaluation(size, message):
    from workbench.tasks.sizes import SizeError

    task = wb.get_task("softmax")
    with pytest.raises(SizeError) as info:
        task.size(size)
    assert str(info.value).startswith(message), str(info.value)
    started = __import__("time").perf_counter()
    with pytest.raises(SizeError):  # evaluate() refuses it too, before a judge process is asked for anything
        wb.evaluate(task, task.solution_candidate(), "cpu", size=size)
    assert __import__("time").perf_counter() - started < 5


def test_axis_and_padding_constants_keep_their_meaningful_zero_and_negative_values():
    from workbench.tasks.sizes import SizeError

    src = ("import torch\nbatch_size = 4\nreduce_dim = 1\npadding = 1\nshape = (4, 8)\nalpha = 0.5\n"
           "class Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
           "def get_inputs():\n    return [torch.randn(batch_size, *shape)]\ndef get_init_inputs():\n    return []\n")
    task = Task.from_source(src, name="probe")
    assert task.size({"reduce_dim": -1, "padding": 0, "alpha": -2.0}) == {"reduce_dim": -1, "padding": 0, "alpha": -2.0}
    for bad, words in (({"padding": -1}, "padding must be 0 or more"), ({"shape": [4, 0]}, "every entry of shape"),
                       ({"shape": "wide"}, "shape must be a list"), ({"dtype": "float16"}, "cannot change its dtype")):
        with pytest.raises(SizeError, match=words):
            task.size(bad)
