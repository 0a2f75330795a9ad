"""Static (AST) anti-cheating checks: every flag fires on the pattern it names, and the patterns honest kernels
use (allocations, views, config dicts, autotune, compiled extensions) stay clean. Pure AST: no worker, no kernels."""

from __future__ import annotations

import textwrap

import pytest

from workbench.errors import UnknownNameError
from workbench.eval.checks.flags import FLAGS, REJECT, WARN
from workbench.eval.checks.static_scan import scan
from workbench.eval.judge.verdict import decide

HEADER = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


def triton_source(forward: str, *, prelude: str = "", init: str = "") -> str:
    """A Triton candidate: HEADER, optional module-level code, and ModelNew with the given forward body."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    ctor = ""
    if init:
        ctor = "    def __init__(self):\n        super().__init__()\n" + textwrap.indent(textwrap.dedent(init).strip(), " " * 8) + "\n\n"
    return f"{HEADER}\n{textwrap.dedent(prelude)}\n\nclass ModelNew(nn.Module):\n{ctor}    def forward(self, x):\n{body}\n"


def flags(source: str, language: str = "triton") -> list[str]:
    """The flags of `source`; plain PyTorch is scanned as a declared baseline (policy "baseline")."""
    return [f.flag for f in scan(source, language, policy="baseline" if language == "torch" else "strict")]


LAUNCH = """
y = torch.empty_like(x)
kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
return y
"""


# ---- each static flag fires ------------------------------------------------------------------------------

def test_no_custom_kernel_for_triton_without_a_jit_function():
    src = "import torch\nimport torch.nn as nn\nimport triton\n\nclass ModelNew(nn.Module):\n" \
          "    def forward(self, x):\n        y = torch.empty_like(x)\n        return y\n"
    assert flags(src) == ["no-custom-kernel"]


def test_no_custom_kernel_for_cuda_without_a_global_function():
    src = 'import torch\nfrom torch.utils.cpp_extension import load_inline\nCPP = "torch::Tensor f(torch::Tensor x);"\n' \
          "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    assert flags(src, "cuda") == ["no-custom-kernel"]
    with_kernel = src.replace('CPP = "', 'CPP = "__global__ void k(float* y) {}\\n')
    assert "no-custom-kernel" not in flags(with_kernel, "cuda")


@pytest.mark.parametrize("forward, prelude", [
    ("return torch.softmax(x, dim=-1)", ""),
    ("return F.softmax(x, dim=-1)", ""),
    ("return torch.nn.functional.gelu(x)", ""),
    ("return x.exp() / x.exp().sum(-1, keepdim=True)", ""),
    ("return x @ x.t()", ""),
    ("return helper(x)", "def helper(x):\n    return torch.exp(x)\n"),
    ("return softmax(x, -1)", "from torch import softmax\n"),
])
def test_torch_compute_in_forward(forward, prelude):
    assert flags(triton_source(forward, prelude=prelude)) == ["torch-compute-in-forward"]


def test_torch_compute_through_an_nn_layer_built_in_init():
    src = triton_source("return self.fc(x)", init="self.fc = nn.Linear(64, 64)")
    assert flags(src) == ["torch-compute-in-forward"]
    # Holding a layer only for its parameters and feeding them to the kernel is fine.
    src = triton_source("y = torch.empty(x.shape[0], 64, device=x.device)\nkernel[(1,)](x, self.fc.weight, y, BLOCK=64)\nreturn y",
                        init="self.fc = nn.Linear(64, 64)")
    assert flags(src) == []


def test_try_fallback_that_computes_in_the_handler():
    src = triton_source("""
        try:
            y = torch.empty_like(x)
            kernel[(1,)](x, y, x.numel(), BLOCK=64)
        except Exception:
            y = self.slow_path(x)
        return y
    """)
    assert flags(src) == ["try-fallback"]


def test_try_that_reraises_is_not_a_fallback():
    src = triton_source("""
        try:
            y = torch.empty_like(x)
            kernel[(1,)](x, y, x.numel(), BLOCK=64)
        except RuntimeError:
            raise
        return y
    """)
    assert flags(src) == []


@pytest.mark.parametrize("variant", ["subclass", "call", "import"])
def test_reference_subclass_call_or_import(variant):
    model = "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    if variant == "subclass":
        src = HEADER + model + "\nclass ModelNew(Model):\n    pass\n"
    elif variant == "call":
        src = triton_source("return Model()(x)", prelude=model)
    else:
        src = triton_source(LAUNCH, prelude="from kwb_ref_0123abcd_1 import get_inputs\n")
    assert flags(src) == ["reference-subclass"]


@pytest.mark.parametrize("forward, prelude, init", [
    # keyed by address, directly and through a variable
    ("if x.data_ptr() not in CACHE:\n    CACHE[x.data_ptr()] = x\nreturn CACHE[x.data_ptr()]", "CACHE = {}", ""),
    ("key = x.data_ptr()\ny = CACHE.get(key)\nreturn y", "CACHE = {}", ""),
    # keyed by content
    ("key = hash(x.numpy().tobytes())\nreturn RESULTS[key]", "RESULTS = dict()", ""),
    # a memoized function
    ("return memo(x)", "import functools\n@functools.lru_cache(maxsize=None)\ndef memo(x):\n    return x", ""),
    # an instance cache keyed by address
    ("key = x.data_ptr()\nif key in self.seen:\n    return self.seen[key]\nreturn x", "", "self.seen = {}"),
])
def test_module_cache(forward, prelude, init):
    found = scan(triton_source(forward, prelude=prelude, init=init), "triton")
    assert [f.flag for f in found if f.severity == REJECT] == ["module-cache"]


def test_stream_use_is_flagged_but_only_warns():
    src = triton_source("""
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y = torch.empty_like(x)
            kernel[(1,)](x, y, x.numel(), BLOCK=64)
        return y
    """)
    found = scan(src, "triton")
    assert [f.flag for f in found] == ["stream-use"] and found[0].severity == WARN
    decision = decide(found)
    assert decision.status is None and decision.warnings == ["stream-use"] and "Fix:" in decision.message


@pytest.mark.parametrize("prelude", ["import threading", "from concurrent.futures import ThreadPoolExecutor",
                                     "import multiprocessing as mp", "import os\nos.fork"])
def test_thread_use(prelude):
    assert flags(triton_source(LAUNCH, prelude=prelude)) == ["thread-use"]


def test_thread_use_applies_to_torch_candidates_too():
    src = "import threading\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    assert flags(src, "torch") == ["thread-use"]


def test_each_static_flag_is_in_the_catalog_with_its_severity():
    expected = {"no-custom-kernel": REJECT, "torch-compute-in-forward": REJECT, "try-fallback": REJECT,
                "reference-subclass": REJECT, "module-cache": REJECT, "stream-use": WARN, "thread-use": REJECT}
    assert {name: FLAGS[name].severity for name in expected} == expected


def test_one_finding_per_flag_with_a_line_number():
    src = triton_source("a = torch.exp(x)\nb = torch.log(x)\nreturn a + b")
    found = scan(src, "triton")
    assert [f.flag for f in found] == ["torch-compute-in-forward"]
    assert "line" in found[0].detail and "torch.exp" in found[0].detail


# ---- honest patterns stay clean --------------------------------------------------------------------------

@pytest.mark.parametrize("forward, prelude", [
    (LAUNCH, ""),
    # allocations with explicit shape/dtype/device, views and reshapes around the launch
    ("""
     x2 = x.contiguous().view(-1, x.shape[-1])
     y = torch.empty(x2.shape, device=x.device, dtype=x.dtype)
     kernel[(triton.cdiv(x2.numel(), 64),)](x2, y, x2.numel(), BLOCK=64)
     return y.reshape(x.shape).view_as(x)
     """, ""),
    ("""
     y = torch.empty_like(x.t().contiguous())
     kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.shape[-1]))
     return y.t().unsqueeze(0).squeeze(0).permute(1, 0).permute(1, 0).t()
     """, ""),
    # a module-level dict of configs keyed by the shape
    ("""
     cfg = CONFIGS.get(x.shape[-1]) or CONFIGS.setdefault(x.shape[-1], {"BLOCK": 64})
     y = torch.empty_like(x)
     kernel[(triton.cdiv(x.numel(), cfg["BLOCK"]),)](x, y, x.numel(), BLOCK=cfg["BLOCK"])
     return y
     """, "CONFIGS = {}"),
    # an autotune-style grid callable
    ("""
     y = torch.empty_like(x)
     grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)
     kernel[grid](x, y, x.numel())
     return y
     """, ""),
    # a compiled extension's method that happens to share a compute op's name
    ("return ext.softmax(x.contiguous())", "ext = None  # torch.utils.cpp_extension.load_inline(...) in practice"),
    ("return _C.forward(x, 64)", "_C = None"),
    # zero-initialised output for an accumulating kernel, dtype conversion of the result
    ("""
     y = torch.zeros(x.shape[0], device=x.device, dtype=torch.float32)
     kernel[(1,)](x, y, x.numel(), BLOCK=64)
     return y.to(x.dtype)
     """, ""),
    # an instance dict of scratch buffers keyed by shape (not by the inputs' identity)
    ("""
     buf = self.buffers.get(x.shape)
     if buf is None:
         buf = self.buffers.setdefault(x.shape, torch.empty_like(x))
     kernel[(1,)](x, buf, x.numel(), BLOCK=64)
     return buf.clone()
     """, ""),
])
def test_honest_triton_patterns_are_not_flagged(forward, prelude):
    assert flags(triton_source(forward, prelude=prelude)) == []


def test_autotune_decorated_kernel_counts_as_a_kernel():
    src = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import autotune, Config


@autotune(configs=[Config({"BLOCK": 64}), Config({"BLOCK": 128})], key=["n"])
@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, y, x.numel())
        return y
"""
    assert flags(src) == []


def test_torch_language_candidates_may_compute_with_torch():
    src = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass ModelNew(nn.Module):\n" \
          "    def forward(self, x):\n        e = torch.exp(x - x.amax(-1, keepdim=True))\n" \
          "        return F.relu(e / e.sum(-1, keepdim=True))\n"
    assert flags(src, "torch") == []


def test_syntax_errors_are_left_to_the_loader():
    assert scan("def forward(:\n", "triton") == []


# ---- kernel policy -----------------------------------------------------------------------------------------

EPILOGUE = """
y = F.conv2d(x, self.weight, padding=1)
out = torch.empty_like(y)
kernel[(triton.cdiv(y.numel(), 64),)](y, out, y.numel(), BLOCK=64)
return out
"""


def test_library_calls_are_rejected_under_strict_and_allowed_under_partial():
    src = triton_source(EPILOGUE, init="self.weight = nn.Parameter(torch.randn(8, 3, 3, 3))")
    assert [f.flag for f in scan(src, "triton", policy="strict")] == ["torch-compute-in-forward"]
    assert scan(src, "triton", policy="partial") == []
    assert scan(src, "triton") == scan(src, "triton", policy="strict")  # strict is the default
    layer = triton_source("y = self.conv(x)\nout = torch.empty_like(y)\n"
                          "kernel[(1,)](y, out, y.numel(), BLOCK=64)\nreturn out", init="self.conv = nn.Conv2d(3, 8, 3)")
    assert flags(layer) == ["torch-compute-in-forward"] and scan(layer, "triton", policy="partial") == []


def test_partial_still_needs_a_kernel_of_its_own_and_no_fallback():
    no_kernel = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport triton\n\n" \
                "class ModelNew(nn.Module):\n    def forward(self, x):\n        return F.relu(x)\n"
    assert [f.flag for f in scan(no_kernel, "triton", policy="partial")] == ["no-custom-kernel"]
    cuda = 'import torch\nCPP = "torch::Tensor f(torch::Tensor x);"\nclass ModelNew(torch.nn.Module):\n' \
           "    def forward(self, x):\n        return torch.relu(x)\n"
    assert [f.flag for f in scan(cuda, "cuda", policy="partial")] == ["no-custom-kernel"]
    fallback = triton_source("""
        try:
            y = torch.empty_like(x)
            kernel[(1,)](x, y, x.numel(), BLOCK=64)
        except Exception:
            y = torch.relu(x)
        return y
    """)
    assert [f.flag for f in scan(fallback, "triton", policy="partial")] == ["try-fallback"]


def test_declared_torch_baselines_are_not_held_to_the_kernel_policy_but_inferred_torch_is():
    src = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
          "        return torch.softmax(x, -1) @ x.t()\n"
    assert scan(src, "torch", policy="baseline") == []
    assert "no-custom-kernel" in [f.flag for f in scan(src, "torch", policy="partial")]


def test_unknown_policy_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="kernel policy 'loose'.*partial, strict"):
        scan(triton_source(LAUNCH), "triton", policy="loose")


# ---- a class named Model -----------------------------------------------------------------------------------

OWN_MODEL = f"""{HEADER}

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y


def get_inputs():
    return [torch.randn(8, 64)]


if __name__ == "__main__":
    print(Model()(*get_inputs()))
"""


def test_a_candidate_whose_own_class_is_named_model_is_accepted():
    assert flags(OWN_MODEL) == []
    assert flags(OWN_MODEL + "\nModelNew = Model\n") == []  # an alias to the candidate's own class


def test_the_entry_named_model_is_still_scanned_for_torch_compute():
    src = OWN_MODEL.replace("y = torch.empty_like(x)\n", "y = torch.softmax(x, -1)\n")
    assert flags(src) == ["torch-compute-in-forward"]


@pytest.mark.parametrize("tail", [
    "class ModelNew(Model):\n    pass\n",
    "class Base(Model):\n    pass\n\nclass ModelNew(Base):\n    pass\n",
    "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.ref = Model()\n\n"
    "    def forward(self, x):\n        return self.ref(x)\n",
    # built one call away, in a module-level helper the constructor calls
    "def make():\n    return Model()\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.ref = make()\n\n    def forward(self, x):\n        return self.ref(x)\n",
])
def test_beside_modelnew_a_class_named_model_is_the_reference(tail):
    assert flags(OWN_MODEL + "\n" + tail)[:1] == ["reference-subclass"]


def test_work_hidden_in_a_local_helper_or_base_class_is_found():
    helper = "class Helper(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, -1)\n"
    held = triton_source("return self.inner(x)", prelude=helper, init="self.inner = Helper()")
    built = triton_source("return Helper()(x)", prelude=helper)
    base = f"{HEADER}\n{helper}\n\nclass ModelNew(Helper):\n    pass\n"
    for src in (held, built, base):
        assert flags(src) == ["torch-compute-in-forward"], src


# ---- harness-tamper and foreign-compute --------------------------------------------------------------------

@pytest.mark.parametrize("forward, prelude", [
    (LAUNCH, "import sys\nsys.setprofile(lambda *a: None)"),
    (LAUNCH, "import sys as s\ns.settrace(None)"),
    (LAUNCH, "import threading\nthreading.settrace(lambda *a: None)"),
    ("import gc\nrefs = gc.get_objects()\n" + LAUNCH, ""),
    ("import gc\nowners = gc.get_referrers(x)\n" + LAUNCH, ""),
    ("import sys\ncaller = sys._getframe(1)\n" + LAUNCH, ""),
    ("from sys import _getframe\nf = _getframe(2)\n" + LAUNCH, ""),
    ("import inspect\nstack = inspect.stack()\n" + LAUNCH, ""),
    ("import inspect\nup = inspect.currentframe().f_back\n" + LAUNCH, ""),
    ("ref = frame.f_back.f_locals['ref']\n" + LAUNCH, "frame = None"),
    (LAUNCH, "def fast():\n    pass\n\ntorch.allclose.__code__ = fast.__code__"),
    (LAUNCH, "def fast():\n    pass\n\nsetattr(torch.allclose, '__code__', fast.__code__)"),
    (LAUNCH, "import workbench"),
    (LAUNCH, "from workbench.eval import timing"),
    (LAUNCH, "import importlib\nimportlib.import_module('workbench.eval.judge.correctness.compare')"),
    (LAUNCH, "import sys\nharness = sys.modules['workbench.eval.wire.timed_loop']"),
    (LAUNCH, "import sys\nharness = sys.modules.get('workbench')"),
    (LAUNCH, "import sys\nfound = [m for m in sys.modules.values() if hasattr(m, 'compare')]"),
    (LAUNCH, "import sys\nname = 'work' + 'bench'\nharness = sys.modules[name]"),
])
def test_harness_tamper(forward, prelude):
    found = scan(triton_source(forward, prelude=prelude), "triton")
    names = [f.flag for f in found]
    assert names[0] == "harness-tamper" and set(names) <= {"harness-tamper", "thread-use"}, found  # threading
    assert found[0].severity == REJECT and "line" in found[0].detail


def test_harness_tamper_applies_to_torch_candidates_too():
    src = "import sys\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
          "        sys.settrace(None)\n        return x * 2\n"
    assert flags(src, "torch") == ["harness-tamper"]


@pytest.mark.parametrize("prelude", [
    "import math\nimport os\nimport gc\ngc.collect()\nLIMIT = os.environ.get('BLOCK', '64')",
    "import sys\nPY = sys.version_info\nSELF = sys.modules[__name__]\nTORCH = sys.modules['torch']",
    "import inspect\nPARAMS = inspect.signature(torch.empty_like).parameters",
    "frames_per_second = 30\nf_backup = None",
    "import functools\nimport itertools\nfrom typing import Optional",
])
def test_honest_module_code_is_not_harness_tamper(prelude):
    assert flags(triton_source(LAUNCH, prelude=prelude)) == []


@pytest.mark.parametrize("forward, prelude", [
    (LAUNCH, "import numpy as np"),
    (LAUNCH, "from numpy import matmul"),
    (LAUNCH, "import ctypes\nlib = None"),
    (LAUNCH, "import cffi"),
    ("y = torch.from_numpy(x.cpu().numpy() * 2)\nkernel[(1,)](y, y, y.numel(), BLOCK=64)\nreturn y", ""),
])
def test_foreign_compute_warns(forward, prelude):
    found = scan(triton_source(forward, prelude=prelude), "triton")
    assert [f.flag for f in found] == ["foreign-compute"]
    decision = decide(found)
    assert decision.status is None and decision.warnings == ["foreign-compute"] and found[0].severity == WARN


def test_subprocess_is_foreign_compute_and_thread_use():
    found = scan(triton_source(LAUNCH, prelude="import subprocess"), "triton")
    assert {f.flag for f in found} == {"thread-use", "foreign-compute"}
    assert decide(found).status == "rejected"


def test_new_flags_are_in_the_catalog_with_their_severity():
    assert FLAGS["harness-tamper"].severity == REJECT and FLAGS["harness-tamper"].status == "rejected"
    assert FLAGS["foreign-compute"].severity == WARN
    assert "Model" in FLAGS["reference-subclass"].fix


def test_replacing_a_timer_is_flagged_through_aliases_and_setattr_but_attributes_named_time_are_not():
    from workbench.eval.checks.static_scan import scan

    head = "import torch\nimport triton\nimport triton.language as tl\n"
    body = ("\n@triton.jit\ndef k(x):\n    pass\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        y = torch.empty_like(x)\n        k[(1,)](y)\n        return y\n")
    patched = [
        "import time as t\nt.perf_counter = lambda: 0.0\n",
        "setattr(torch.cuda.Event, 'elapsed_time', lambda self, end: 0.0)\n",
        "torch.cuda.synchronize = lambda *a: None\n",
        "from triton import testing\ntesting.do_bench = lambda *a, **k: 0.001\n",
    ]
    for extra in patched:
        flags = [f.flag for f in scan(head + extra + body, "triton")]
        assert "timer-patch" in flags, extra
    honest = head + "\nclass Clock:\n    pass\n\n\nc = Clock()\nc.time = 3.0\n" + body
    assert "timer-patch" not in [f.flag for f in scan(honest, "triton")]
