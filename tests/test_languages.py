"""The kernel languages as plugins (workbench/languages/, docs/languages.md): the one table, inference from source,
each language's interface (kernels it owns, profiled names it claims, what a CPU machine does with it), the runner's
launch hooks, and what an evaluation answers on a CPU for CuTe DSL and Helion with their packages absent or present.
"""

from __future__ import annotations

import ast
import os
import sys
import types
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench import languages
from workbench.errors import CandidateError, UnknownNameError
from workbench.eval.checks import runtime as guards
from workbench.eval.checks import static_scan
from workbench.eval.judge.runners import build_cache
from workbench.eval.runner import launches
from workbench.languages.base import CallHook, Language, objects_of_type

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ROOT / "benchmarks" / "candidates"
CHEATS = ROOT / "tests" / "cheats"
sys.path.insert(0, str(CHEATS))
import gallery  # noqa: E402

HAS_HELION = languages.base.installed("helion")


def source(name: str) -> str:
    return (CANDIDATES / f"softmax_{name}.py").read_text()


# ---- the table and inference ---------------------------------------------------------------------------

def test_the_table_lists_every_language_in_inference_order_and_the_candidate_uses_it():
    assert languages.names() == ("helion", "cute", "triton", "cuda", "torch")
    assert wb.LANGUAGES == languages.names()
    for name in languages.names():
        assert languages.get(name).name == name
    with pytest.raises(UnknownNameError, match="known languages: cuda, cute, helion, torch, triton"):
        languages.get("tilelang")
    with pytest.raises(CandidateError, match="choose one of helion, cute, triton, cuda, torch"):
        wb.Candidate(source="x = 1", language="tilelang")


@pytest.mark.parametrize("name", ["cute", "helion", "triton", "cuda", "torch"])
def test_each_benchmark_candidate_is_inferred_as_its_language(name):
    assert wb.Candidate(source=source(name)).language == name


@pytest.mark.parametrize("text, expected", [
    ("import helion\nimport triton\n", "helion"),  # Helion sources may use triton helpers
    ("from helion import language as hl\n", "helion"),
    ("@helion.kernel()\ndef f(x):\n    return x\n", "helion"),
    ("import cutlass\nfrom cutlass import cute\n", "cute"),
    ("import cutlass.cute as cute\nimport triton\n", "cute"),
    ("# uses helion? no\nimport triton\n", "triton"),
    ("src = '__global__ void k() {}'\n", "cuda"),
    ("import torch\n", "torch"),
])
def test_inference_tries_languages_in_table_order(text, expected):
    assert languages.infer(text) == expected


def test_a_new_language_is_one_module_and_a_row():
    class Tile(Language):
        def detect(self, source: str) -> bool:
            return "import tilelang" in source

    tile = Tile(name="tilelang", title="TileLang", decorators=("tilelang.jit",), compiled=True)
    try:
        languages.register(tile)
        assert languages.names()[-2:] == ("tilelang", "torch")  # before the fallback
        assert languages.infer("import tilelang\n@tilelang.jit\ndef k(): pass\n") == "tilelang"
        cand = wb.Candidate(source="import tilelang\n", language="tilelang")
        assert cand.language == "tilelang"
        found = static_scan.scan("import tilelang\nclass ModelNew:\n    def forward(self, x):\n        return x\n",
                                 "tilelang")
        assert [f.flag for f in found] == ["no-custom-kernel"] and "@tilelang.jit" in found[0].detail
    finally:
        languages.LANGUAGES.pop("tilelang")
    assert "tilelang" not in languages.names()


# ---- each language's interface ------------------------------------------------------------------------

@pytest.mark.parametrize("name, kernels", [
    ("cute", {"softmax_rows"}),
    ("helion", {"softmax_rows", "_helion_softmax_rows"}),
    ("triton", {"softmax_rows"}),
    ("cuda", {"softmax_rows_kernel"}),
    ("torch", set()),
])
def test_every_language_names_the_kernels_its_source_defines(name, kernels):
    language = languages.get(name)
    text = source(name)
    tree = ast.parse(text)
    assert language.own_kernel_names(tree, text) == kernels
    assert language.has_kernel(tree, text)
    assert guards.own_kernel_names(text) >= kernels


@pytest.mark.parametrize("name", ["cute", "helion", "triton", "cuda"])
def test_a_source_without_a_kernel_is_no_custom_kernel_in_every_compiled_language(name):
    text = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clone()\n"
    language = languages.get(name)
    assert language.compiled and not language.has_kernel(ast.parse(text), text)
    flags = [f for f in static_scan.scan(text, name) if f.flag == "no-custom-kernel"]
    assert flags and flags[0].detail == language.missing_kernel()


def test_profiled_names_are_claimed_only_as_each_compiler_names_them():
    cute, helion = languages.get("cute"), languages.get("helion")
    name = "kernel_cutlass_softmax_rows_tensorptrf32gmemalign4o1i641_tensorptrf32gmemalign4o1i641_0"
    assert cute.is_own_kernel(name, {"softmax_rows"})
    assert not cute.is_own_kernel(name, {"rows"}) and not cute.is_own_kernel(name, {"softmax_row"})
    # cuBLAS's and ATen's kernels never count, whatever the candidate calls its kernels.
    assert not cute.is_own_kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", {"gemm"})
    assert not guards.is_own("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", {"gemm"})
    assert not guards.is_own("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)",
                             {"softmax_rows"})
    own = guards.own_kernel_names(source("helion"))
    assert helion.is_own_kernel("_helion_softmax_rows", own) and guards.is_own("_helion_softmax_rows", own)
    assert guards.judge_coverage({name: 90.0, "void at::native::copy_kernel<float>()": 10.0},
                                 guards.own_kernel_names(source("cute")), "strict") == (0.9, [])


def test_kernel_bodies_of_every_language_are_kernel_code_not_torch_compute_in_forward():
    assert [f.flag for f in static_scan.scan(source("helion"), "helion")] == []
    assert [f.flag for f in static_scan.scan(source("cute"), "cute")] == []
    handoff = (CHEATS / "cute_torch_handoff.py").read_text()
    assert "torch-compute-in-forward" in [f.flag for f in static_scan.scan(handoff, "cute")]


# ---- what a machine without the package or without a GPU does ----------------------------------------

def _fake_package(tmp_path: Path, *modules: str) -> None:
    for module in modules:
        folder = tmp_path.joinpath(*module.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")


def test_cute_absent_says_how_to_install_and_present_without_a_gpu_says_it_needs_one(tmp_path, monkeypatch):
    cute = languages.get("cute")
    absent = cute.availability("cpu")
    assert not absent.runs and "not installed" in absent.message and "pip install -e '.[cute]'" in absent.message
    _fake_package(tmp_path, "cutlass", "cutlass.cute")
    monkeypatch.syspath_prepend(str(tmp_path))
    present = cute.availability("cpu")
    assert not present.runs and "CuTe DSL needs an NVIDIA GPU" in present.message
    assert "not installed" not in present.message and "device='cuda'" in present.message
    assert cute.availability("cuda").runs


def test_helion_absent_says_how_to_install_and_present_runs_in_reference_mode_on_the_cpu(tmp_path, monkeypatch):
    helion = languages.get("helion")
    if not HAS_HELION:
        absent = helion.availability("cpu")
        assert not absent.runs and "pip install -e '.[helion]'" in absent.message
    _fake_package(tmp_path, "helion")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert helion.availability("cpu").runs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELION_", "TRITON_CACHE_DIR"))}
    monkeypatch.setattr(os, "environ", {**env, "TRITON_INTERPRET": "1"})  # the runner's, not this process's
    helion.prepare_runner("cpu", str(tmp_path))
    # Helion refuses TRITON_INTERPRET and HELION_INTERPRET together: the runner trades one for the other.
    assert "TRITON_INTERPRET" not in os.environ and os.environ["HELION_INTERPRET"] == "1"
    assert os.environ["HELION_AUTOTUNE_EFFORT"] == "quick" and os.environ["HELION_AUTOTUNE_PROGRESS_BAR"] == "0"
    assert os.environ["HELION_AUTOTUNE_BENCHMARK_SUBPROCESS"] == "0"  # inputs through a file would pass the file cap
    assert os.environ["HELION_CACHE_DIR"] == os.path.join(str(tmp_path), "helion")


@pytest.mark.skipif(languages.base.installed("cutlass"), reason="CuTe DSL is installed here")
def test_a_cute_candidate_on_a_cpu_is_a_compile_error_with_the_install_hint():
    result = wb.evaluate(gallery.tiny_task(), wb.Candidate(source=source("cute")), device="cpu", time_it=False)
    assert result.status == "compile_error" and result.language == "cute"
    assert "CuTe DSL" in result.message and "pip install -e '.[cute]'" in result.message


def test_a_cute_candidate_with_cute_installed_but_no_gpu_is_a_compile_error_saying_it_needs_one(tmp_path, monkeypatch):
    """The judge decides from what its own interpreter finds: a fake CuTe DSL on its path stands for an install."""
    from workbench.dispatch.pool import discard_worker

    _fake_package(tmp_path, "cutlass", "cutlass.cute")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    discard_worker("cpu")
    try:
        result = wb.evaluate(gallery.tiny_task(), wb.Candidate(source=source("cute")), device="cpu", time_it=False)
    finally:
        discard_worker("cpu")  # the next tests get a judge without the fake package
    assert result.status == "compile_error", result.message
    assert "CuTe DSL needs an NVIDIA GPU" in result.message and "not installed" not in result.message


@pytest.mark.skipif(HAS_HELION, reason="Helion is installed here")
def test_a_helion_candidate_without_helion_is_a_compile_error_with_the_install_hint():
    result = wb.evaluate(gallery.tiny_task(), wb.Candidate(source=source("helion")), device="cpu", time_it=False)
    assert result.status == "compile_error" and "pip install -e '.[helion]'" in result.message


@pytest.mark.skipif(not HAS_HELION, reason="needs helion (pip install -e '.[helion]')")
def test_helion_on_the_cpu_runs_in_reference_mode_and_its_cheat_is_caught():
    ok = wb.evaluate(gallery.tiny_task(), wb.Candidate(source=source("helion")), device="cpu", time_it=True)
    assert ok.status == "ok", ok.message
    assert ok.timing is not None and ok.timing.clock == "interpreter" and ok.speedup is None
    cheat = gallery.evaluate("helion_cached_output.py", "cpu")
    assert not gallery.verdict_problems("helion_cached_output.py", cheat, "cpu"), cheat.message


def test_the_gallery_names_what_a_language_entry_needs():
    entries = {n: e for n, e in gallery.MANIFEST.items() if e.get("requires")}
    assert {"helion_cached_output.py", "cute_torch_handoff.py"} <= set(entries)
    for name, entry in entries.items():
        assert wb.Candidate.from_file(CHEATS / name).language == entry["requires"]
        assert (gallery.missing(name) is None) == languages.get(entry["requires"]).availability("cuda").runs


# ---- the runner's launch hooks ---------------------------------------------------------------------------

class _CalledKernel:
    """A kernel object launched by calling it, as Helion's are."""

    def __call__(self, x):
        return x * 2


class _Calls(Language):
    def kernel_objects(self, module):
        return objects_of_type(module, _CalledKernel)

    def launch_hook(self, obj):
        return CallHook(obj)


@pytest.fixture()
def called_language():
    language = languages.register(_Calls(name="called", title="Called", tracks_launches=True))
    yield language
    languages.LANGUAGES.pop("called")


def test_a_call_hook_counts_launches_under_any_name_and_puts_the_class_back(called_language):
    kernel = _CalledKernel()
    module = types.SimpleNamespace(kern=kernel)
    module.__dict__["Holder"] = type("Holder", (), {"k": kernel})
    alias = kernel
    with launches.track_launches(module) as log:
        out = alias(torch.ones(3))
        log.observe(out)
    assert type(kernel) is _CalledKernel and torch.equal(kernel(torch.ones(1)), torch.full((1,), 2.0))
    report = launches.report(log, launches.thread_idents())
    assert report.launches == 1 and report.kernels == ("kern",)
    assert report.outputs_launched and not report.outputs_changed_after_launch and report.tampered == ()


def test_an_output_a_called_kernel_returned_and_forward_then_changed_is_a_decoy(called_language):
    module = types.SimpleNamespace(kern=_CalledKernel())
    with launches.track_launches(module) as log:
        out = module.kern(torch.ones(4))
        out.add_(1)  # computed after the launch, outside the candidate's kernel
        log.observe(out)
    report = launches.report(log, launches.thread_idents())
    assert report.outputs_changed_after_launch
    assert [f.flag for f in guards.judge_launches([report], "called")] == ["decoy-kernel"]


def test_a_call_hook_replaced_by_the_candidate_is_reported(called_language):
    kernel = _CalledKernel()
    module = types.SimpleNamespace(kern=kernel)
    with launches.track_launches(module) as log:
        type(kernel).__call__ = lambda self, x: x  # the candidate's own launch counter
    assert log.tampered == ["kern.__call__ (the launch counter)"] and type(kernel) is _CalledKernel


def test_the_record_of_what_ran_leaves_a_called_kernel_out(called_language):
    from workbench.eval.runner.op_record import recording

    module = types.SimpleNamespace(kern=_CalledKernel())
    x = torch.ones(4)
    with recording(module) as record:
        module.kern(x)  # its multiplication runs inside the launch
        x.neg()
    rec = record.report()
    assert rec is not None and rec.complete and rec.launches == 1 and rec.ops == {"aten.neg.default": 1}


# ---- caches, prompts, doctor ------------------------------------------------------------------------------

def test_the_cute_jit_cache_is_one_directory_per_source_on_a_gpu_only(tmp_path, monkeypatch):
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build_cache, "toolchain", lambda: "test-toolchain")
    assert build_cache.language_cache_dir("cute", "a", "cpu") is None
    one, two = (build_cache.language_cache_dir("cute", s, "cuda") for s in ("a", "b"))
    assert one is not None and two is not None and one != two and one.is_dir()
    assert build_cache.language_cache_dir("cute", "a", "cuda") == one
    assert languages.get("cute").cache_mount == "/tmp/cute_dsl_cache"


def test_the_cute_runner_uses_its_bound_cache_else_its_scratch(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != "CUTE_DSL_CACHE_DIR"})
    languages.get("cute").prepare_runner("cuda", str(tmp_path))
    assert os.environ["CUTE_DSL_CACHE_DIR"] == str(tmp_path / "cute_dsl_cache")


@pytest.mark.parametrize("name, words", [
    ("helion", ["@helion.kernel", "hl.tile", "helion.Config"]),
    ("cute", ["@cute.kernel", "@cute.jit", "cute.compile", "from_dlpack"]),
])
def test_prompts_can_ask_for_each_new_language(name, words):
    from workbench.llm.prompts import generation_prompt, prompt_languages

    assert set(prompt_languages()) == {"helion", "cute", "triton", "cuda"}
    prompt = generation_prompt(gallery.tiny_task(), name, device="cuda")
    assert prompt.language == name and prompt.template == f"{name}/generate"
    assert languages.get(name).title in prompt.system
    for word in words:
        assert word in prompt.text
    with pytest.raises(UnknownNameError, match="known prompt languages: cuda, cute, helion, triton"):
        generation_prompt(gallery.tiny_task(), "torch")


def test_doctor_lists_every_language_package_with_its_version_or_how_to_install_it():
    from workbench.cli.doctor import format_report, kernel_languages, report

    rows = {row["name"]: row for row in kernel_languages()}
    assert set(rows) == {"helion", "cute", "triton", "torch"}
    assert rows["triton"]["version"] and rows["torch"]["version"] == str(torch.__version__)
    assert rows["cute"]["package"] == "nvidia-cutlass-dsl" and rows["cute"]["install"] == "pip install -e '.[cute]'"
    if not languages.base.installed("cutlass"):
        assert rows["cute"]["version"] is None
        assert "nvidia-cutlass-dsl not installed  -> pip install -e '.[cute]'" in format_report(report())


def test_looking_for_helion_kernels_imports_no_helion(tmp_path, monkeypatch):
    """Every runner asks each language for its kernels in the candidate's module; Helion's answer must not import
    Helion (seconds in every runner of every language where it is installed): without the candidate's import of it
    there can be no Helion kernel."""
    import sys
    import types

    from workbench.languages import helion

    (tmp_path / "helion" / "runtime").mkdir(parents=True)
    marker = tmp_path / "imported"
    (tmp_path / "helion" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "helion" or m.startswith("helion.")]:
        monkeypatch.delitem(sys.modules, name)
    module = types.ModuleType("candidate")
    assert helion.LANGUAGE.kernel_objects(module) == []
    assert not marker.exists()
    kernels = types.ModuleType("helion.runtime.kernel")

    class Kernel:
        pass

    kernels.Kernel = Kernel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "helion.runtime.kernel", kernels)
    module.softmax = Kernel()  # type: ignore[attr-defined]
    assert [name for name, _ in helion.LANGUAGE.kernel_objects(module)] == ["softmax"]
