"""The adversarial gallery on the CPU: every cheat in tests/cheats is rejected with the flag its manifest names,
every honest candidate is accepted with no flags, and the verdict reaches the message and the store.

The runtime guards are also tested directly, in this process, where a gallery run would only show the verdict:
launched tensors kept alive for the call, writes checked by content, faster-than-physics on constructed numbers.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.dispatch.pool import discard_worker
from workbench.eval.checks import runtime as guards
from workbench.eval.checks.flags import FLAGS
from workbench.eval.runner import launches
from workbench.result import Result, Timing
from workbench.tasks.task import import_source

sys.path.insert(0, str(Path(__file__).resolve().parent / "cheats"))
import gallery  # noqa: E402

CPU_ENTRIES = gallery.entries("cpu")


@pytest.fixture(scope="module", autouse=True)
def fresh_worker_afterwards():
    """Cheats patch timers and start threads inside the worker: later test files get a clean one."""
    yield
    discard_worker("cpu")


# ---- the manifest describes the gallery ----------------------------------------------------------------

def test_manifest_covers_every_candidate_file_with_a_header():
    files = sorted(p.name for p in gallery.HERE.glob("*.py") if p.name != "gallery.py")
    assert files == gallery.entries()
    cheats = [f for f, e in gallery.MANIFEST.items() if e["expect"] == "rejected"]
    honest = [f for f in files if f.startswith("honest_")]
    assert len(cheats) >= 16 and len(honest) >= 3
    for name, entry in gallery.MANIFEST.items():
        text = (gallery.HERE / name).read_text()
        first = text.splitlines()[0]
        assert first.startswith(("# CHEAT", "# HONEST")), f"{name}: header comment missing"
        assert first.startswith("# HONEST") == (name in honest), name
        ast.parse(text)
        assert entry["where"] in ("cpu", "gpu") and entry["expect"] in ("rejected", "ok")
        for key in ("flag", "gpu_flag"):
            named = entry.get(key) if isinstance(entry.get(key), list) else [entry.get(key)]
            for flag in filter(None, named):
                assert flag in FLAGS, f"{name}: unknown flag {flag!r}"
                if entry["expect"] == "rejected":
                    assert FLAGS[flag].severity == "reject", name
        if entry["expect"] == "rejected":
            assert entry.get("flag"), name


# ---- the gallery, evaluated -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", CPU_ENTRIES)
def test_gallery_entry_on_cpu(name):
    result = gallery.evaluate(name, "cpu")
    problems = gallery.verdict_problems(name, result, "cpu")
    assert not problems, f"{name}: {problems}\n{result.message}"
    if result.status == "ok":
        assert result.flags == [] and result.message.startswith("all checks passed")
        return
    # One line per failed check: "[flag] why (detail). Fix: what to do".
    lines = [ln for ln in result.message.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("[") and "Fix:" in ln for ln in lines), result.message
    named = [ln[1:ln.index("]")] for ln in lines]
    assert set(result.flags) <= set(named) and len(named) == len(set(named)), result.message
    for flag in result.flags:
        assert FLAGS[flag].severity == "reject"


def test_store_keeps_the_flags_and_counts_them(tmp_path):
    store = wb.Store(tmp_path / "gallery.db")
    authored = {"torch_forward.py": "model-a", "no_kernel.py": "model-a", "module_cache.py": "model-b",
                "honest_torch.py": "model-b"}
    for name, author in authored.items():
        cand = wb.Candidate(source=(gallery.HERE / name).read_text(), language=gallery.MANIFEST[name].get("language"),
                            name=name, author=author)
        wb.evaluate(gallery.tiny_task(), cand, device="cpu", time_it=False, store=store)
    frame = store.frame()
    assert len(frame) == 4
    stored = dict(zip(frame["candidate_name"], frame["flags"], strict=True))
    assert stored["no_kernel.py"] == ["no-custom-kernel", "torch-compute-in-forward"]
    assert stored["honest_torch.py"] == []
    # torch_forward.py runs (its static finding waits for the record of what ran): its kernel never launched either.
    assert stored["torch_forward.py"] == ["decoy-kernel", "torch-compute-in-forward"]
    counts = store.flags_frame().groupby(["author", "flag"]).size().to_dict()
    assert counts == {("model-a", "torch-compute-in-forward"): 2, ("model-a", "no-custom-kernel"): 1,
                      ("model-a", "decoy-kernel"): 1, ("model-b", "module-cache"): 1}
    assert set(store.flags_frame(status="rejected")["candidate_name"]) == {"torch_forward.py", "no_kernel.py",
                                                                          "module_cache.py"}


# ---- runtime guards, in process -------------------------------------------------------------------------

def _module(name: str, source: str):
    return import_source(source, f"kwb_test_cheats_{name}")


def _run_tracked(module, *inputs_list):
    """Call ModelNew once per input set under the launch tracker, as the runner does, and judge each call's report
    as the judge does (with whether the output equals an input, which the judge sees)."""
    from workbench.eval.judge.runners.session import _equals_an_input

    model = module.ModelNew()
    logs, passthrough = [], []
    for inputs in inputs_list:
        with launches.track_launches(module) as log:
            log.observe(model(*inputs))
        logs.append(log)
        passthrough.append(_equals_an_input(list(launches._outputs(log.outputs[0])), list(inputs)))
    threads = launches.thread_idents()
    return logs, [guards.judge_launches([launches.report(log, threads)], "triton", [through])
                  for log, through in zip(logs, passthrough, strict=True)]


def test_tensors_given_to_launches_stay_alive_until_the_call_ends():
    module = _module("freed", (gallery.HERE / "freed_scratch.py").read_text())
    x = torch.randn(4, 32)
    logs, findings = _run_tracked(module, [x])
    assert logs[0].launches == ["copy_kernel"] and logs[0].alive == []  # released when the call ended
    out = logs[0].outputs[0]
    assert launches._storage(out) not in logs[0].storages
    assert findings[0] and findings[0][0].flag == "decoy-kernel"


def test_output_computed_elsewhere_and_passed_to_a_kernel_that_leaves_it_alone():
    module = _module("noop", (gallery.HERE / "noop_launch_on_output.py").read_text())
    logs, findings = _run_tracked(module, [torch.randn(4, 32)], [torch.randn(4, 32)])
    out = logs[0].outputs[0]
    assert launches._storage(out) in logs[0].storages  # it was passed to a launch...
    assert all(f and f[0].flag == "decoy-kernel" and "computed elsewhere" in f[0].detail for f in findings)


RELU_IN_PLACE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x.clone()
        relu_kernel[(triton.cdiv(y.numel(), 64),)](y, y.numel(), BLOCK=64)
        return y
"""


def test_honest_in_place_kernel_on_a_clone_is_not_a_decoy_when_an_input_leaves_it_unchanged():
    module = _module("relu", RELU_IN_PLACE)
    positive, mixed = torch.rand(4, 32) + 0.1, torch.randn(4, 32)
    logs, findings = _run_tracked(module, [positive], [mixed])
    # ReLU of positive data changes nothing, so the clone it returns holds content no launch produced...
    assert launches._storage(logs[0].outputs[0]) in logs[0].foreign
    assert launches._storage(logs[1].outputs[0]) not in logs[1].foreign
    # ...but it equals the call's input, which the judge sees: an in-place kernel on a clone, not a decoy.
    assert findings == [[], []]


def test_stray_threads_are_reported_by_the_runner_and_flagged_by_the_judge():
    import threading

    baseline = launches.thread_idents()
    done = threading.Event()
    threading.Thread(target=lambda: done.wait(5), daemon=True, name="deferred-work").start()
    report = launches.report(launches.LaunchLog(), baseline)
    assert report.threads_left == ("deferred-work",)
    assert [f.flag for f in guards.judge_threads([report])] == ["thread-deferral"]
    done.set()
    assert guards.judge_threads([launches.report(launches.LaunchLog(), launches.thread_idents())]) == []


def _timed_result(ms: float, clock: str = "cuda-events", status: str = "ok") -> Result:
    timing = Timing(median_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, ci95_low_ms=ms, ci95_high_ms=ms, n=100, clock=clock)
    return Result(task="gallery_softmax_big", candidate_id="c", candidate_name="c", language="triton", status=status,
                  message="all checks passed", size={"batch_size": 16384, "dim": 4096}, dtype="float32",
                  device="cuda", device_name="NVIDIA H100 80GB HBM3", timing=timing)


def test_faster_than_physics_from_constructed_numbers():
    """The judge's physics check (`roofline.sol.faster_than_physics`, decided in judge/verdict.py) on constructed
    numbers; the caller's annotation only adds numbers and never changes a status."""
    from roofline.sol import PHYSICS_MARGIN, Roof, annotate_result, faster_than_physics
    from workbench.eval.checks.flags import Finding
    from workbench.eval.judge.verdict import decide

    roof = Roof("test GPU", peak_flops=100e12, bandwidth=1e12, source="datasheet")
    counted = {"flops": 5 * 16384 * 4096, "bytes": 1e9}  # floor: 1e9 B / 1e12 B/s = 1 ms (memory-bound)
    task = gallery.big_task()
    assert faster_than_physics(_timed_result(1.2), task, counted, roof) == ""
    honest = annotate_result(_timed_result(1.2), task, counted, roof)
    assert honest.status == "ok" and honest.flags == [] and honest.bound == "memory"
    assert honest.sol_fraction == pytest.approx(1 / 1.2)
    # within the margin: clock boost and timer noise, not a cheat
    assert faster_than_physics(_timed_result(PHYSICS_MARGIN * 1.0 + 0.01), task, counted, roof) == ""
    detail = faster_than_physics(_timed_result(0.02), task, counted, roof)
    assert "floor 1 ms" in detail
    decision = decide([Finding("faster-than-physics", detail)])
    assert decision.status == "rejected" and decision.flags == ["faster-than-physics"]
    assert decision.message.startswith("[faster-than-physics]") and "Fix:" in decision.message
    cheat = annotate_result(_timed_result(0.02), task, counted, roof)
    assert cheat.status == "ok" and cheat.flags == []  # the caller never changes a verdict: the judge made it
    # The datasheet roof of the device the result names is used when none is given.
    auto = _timed_result(0.002)
    assert faster_than_physics(auto, task, {"flops": 0, "bytes": 2 * 16384 * 4096 * 4})
    assert annotate_result(auto, task, {"flops": 0, "bytes": 2 * 16384 * 4096 * 4}).metadata["roof"] == "H100 SXM"
    # The interpreter is not hardware: no roofline, no verdict.
    interp = _timed_result(1e-6, clock="interpreter")
    assert faster_than_physics(interp, task, counted, roof) == ""
    assert annotate_result(interp, task, counted, roof).sol_fraction is None


def test_docs_carry_the_current_flag_table_and_thresholds():
    from roofline.sol import PHYSICS_MARGIN
    from workbench.eval.checks.flags import flag_table_markdown

    doc = (Path(__file__).resolve().parents[1] / "docs" / "anti-cheating.md").read_text()
    assert flag_table_markdown() in doc, "regenerate the table in docs/anti-cheating.md"
    assert f"= {guards.STRICT_MIN_COVERAGE:.0%}" in doc and f"= {guards.PARTIAL_MIN_COVERAGE:.0%}" in doc
    assert f"(= {PHYSICS_MARGIN:g};" in doc
    for name in gallery.entries():
        if not name.startswith("honest_"):
            assert f"`{name}`" in doc, f"{name} missing from the gallery table in the docs"
