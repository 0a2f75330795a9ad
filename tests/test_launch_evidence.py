"""Launch evidence, piece by piece, in this process: what the runner's tracker records about an output's content, the
seal over the runner's hook points, the interpreter probe and the judge's reading of probe pairs and profiles
(`runner/launches.py`, `runner/seal.py`, `judge/evidence/probe.py`, `checks/evidence.py`). The end-to-end attacks are
in tests/redteam/test_launch_forgery.py."""

from __future__ import annotations

import os
import time
import types

import pytest
import torch

from workbench import languages
from workbench.eval.checks import evidence as ev
from workbench.eval.checks import runtime as guards
from workbench.eval.judge.evidence.probe import MAX_PROBES, PROBE_CALL_NS, ProbePlanner
from workbench.eval.judge.runners.process import cpu_ns
from workbench.eval.runner import launches, seal
from workbench.result import Result
from workbench.tasks.task import import_source

KERNELS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


@triton.jit
def scale_kernel(y_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, v * factor, mask=offs < n)


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(y_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, v, mask=(offs < n) & (v != v))


def softmax(x, y):
    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))


class TwoViews(nn.Module):
    """Honest: softmax into y, then a second kernel rescales y through a flat view of the same storage."""

    def forward(self, x):
        y = torch.empty_like(x)
        softmax(x, y)
        flat = y.view(-1)
        scale_kernel[(triton.cdiv(flat.numel(), 64),)](flat, flat.numel(), 2.0, BLOCK=64)
        return y


class OverwrittenAfter(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax(x, y)
        y.copy_(torch.softmax(x, -1))
        return y


class OverwrittenBetween(nn.Module):
    """torch writes the output between two launches; the second launch gets it and leaves it alone."""

    def forward(self, x):
        y = torch.empty_like(x)
        softmax(x, y)
        y.copy_(torch.softmax(x, -1) * 2)
        touch_kernel[(triton.cdiv(y.numel(), 64),)](y, y.numel(), BLOCK=64)
        return y


class ReplacesItsCounter(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax(x, y)
        softmax_kernel.run = lambda *a, **k: None
        return y
'''


@pytest.fixture()
def module():
    return import_source(KERNELS, f"kwb_test_launch_evidence_{time.monotonic_ns()}")


def _track(module, model_name: str, x: torch.Tensor):
    model = getattr(module, model_name)()
    with launches.track_launches(module) as log:
        log.observe(model(x))
    return log, launches.report(log, launches.thread_idents())


# ---- what the tracker records about the output's content -------------------------------------------------------

def test_two_honest_kernels_writing_the_output_through_different_views_leave_nothing_foreign(module):
    x = torch.randn(4, 32)
    log, report = _track(module, "TwoViews", x)
    assert report.launches == 2 and report.outputs_launched
    assert not report.outputs_prefilled_unchanged and not report.outputs_changed_after_launch
    torch.testing.assert_close(log.outputs[0], 2 * torch.softmax(x, -1))
    assert guards.judge_launches([report], "triton") == []


def test_an_output_overwritten_after_the_last_launch_is_a_decoy(module):
    _, report = _track(module, "OverwrittenAfter", torch.randn(4, 32))
    assert report.outputs_changed_after_launch and report.outputs_prefilled_unchanged
    found = guards.judge_launches([report], "triton")
    assert [f.flag for f in found] == ["decoy-kernel"] and "after the candidate's last kernel launch" in found[0].detail


def test_an_output_overwritten_between_launches_and_passed_to_one_that_leaves_it_is_foreign(module):
    _, report = _track(module, "OverwrittenBetween", torch.randn(4, 32))
    assert report.outputs_prefilled_unchanged and not report.outputs_changed_after_launch
    assert [f.flag for f in guards.judge_launches([report], "triton")] == ["decoy-kernel"]
    # The judge excuses foreign content only where the output equals one of the call's inputs.
    assert guards.judge_launches([report], "triton", [True]) == []


def test_a_counter_replaced_inside_forward_is_named_in_the_report(module):
    _, report = _track(module, "ReplacesItsCounter", torch.randn(4, 32))
    assert report.tampered == ("softmax_kernel.run (the launch counter)",)
    found = guards.judge_tamper(report.tampered)
    assert [f.flag for f in found] == ["harness-tamper"] and "softmax_kernel.run" in found[0].detail
    assert guards.judge_tamper(()) == []


def test_the_tracker_uses_its_own_torch_equal(module, monkeypatch):
    # A patched torch.equal (every launch "changed" its output) does not reach the tracker.
    monkeypatch.setattr(torch, "equal", lambda a, b: False)
    _, report = _track(module, "OverwrittenAfter", torch.randn(4, 32))
    assert report.outputs_changed_after_launch


# ---- the seal ------------------------------------------------------------------------------------------------

def test_the_seal_names_every_replaced_hook_point_and_nothing_else():
    space = types.ModuleType("kwb_test_sealed")
    exec("def report(x, y=1):\n    return x + y\n\nclass Hook:\n    def run(self):\n        return 1\n", vars(space))
    sealed = seal.Seal()
    sealed.add_module(space)
    sealed.add_class(space.Hook, "Hook", "run")
    assert sealed.broken() == ()
    original = space.report

    space.report = lambda x, y=1: x  # a module attribute
    assert sealed.broken() == ("kwb_test_sealed.report",)
    space.report = original
    original.__code__ = (lambda x, y=1: x).__code__  # the same function, its code swapped
    assert sealed.broken() == ("kwb_test_sealed.report",)

    fresh = types.ModuleType("kwb_test_sealed2")
    exec("def f(a, b=len):\n    return b(a)\n\nclass C:\n    def run(self):\n        return 1\n", vars(fresh))
    sealed = seal.Seal()
    sealed.add_module(fresh)
    sealed.add_class(fresh.C, "C", "run")
    fresh.f.__defaults__ = (sum,)  # a default swapped
    fresh.C.run = lambda self: 2  # a class attribute
    vars(fresh)["isinstance"] = lambda *a: True  # a global that shadows a builtin
    assert set(sealed.broken()) == {"kwb_test_sealed2.f", "C.run", "kwb_test_sealed2.isinstance (shadows the builtin)"}


def test_the_runner_seals_triton_and_torch_entry_points_that_exist():
    sealed = seal.Seal()
    seal.triton_entry_points(sealed)
    seal.torch_entry_points(sealed)
    labels = {entry[0] for entry in sealed._entries}
    assert {"triton.runtime.jit.JITFunction.run", "triton.runtime.interpreter.GridExecutor.__call__",
            "torch.equal", "torch.profiler.profile.__exit__",
            "torch.utils.cpp_extension.load_inline"} <= labels
    assert sealed.broken() == ()


# ---- the interpreter probe and the judge's reading of it -------------------------------------------------------

def test_a_probe_burns_its_budget_in_every_interpreted_launch_and_only_then(module):
    from triton.runtime import interpreter

    assert os.environ.get("TRITON_INTERPRET") == "1"
    original = interpreter.GridExecutor.__call__
    try:
        probing = launches.interpreter_probe(languages.get("triton").probe_target())
        x, y = torch.randn(4, 32), torch.empty(4, 32)
        module.softmax(x, y)  # warm
        started = time.thread_time_ns()
        module.softmax(x, y)
        plain = time.thread_time_ns() - started
        with probing(20_000_000):
            started = time.thread_time_ns()
            module.softmax(x, y)
            module.softmax(x, y)
            probed = time.thread_time_ns() - started
        assert probed >= 40_000_000 > plain
        started = time.thread_time_ns()
        module.softmax(x, y)
        assert time.thread_time_ns() - started < 20_000_000  # the budget ends with the call
    finally:
        interpreter.GridExecutor.__call__ = original


def test_the_runner_cpu_time_the_judge_reads_counts_every_thread_of_a_process():
    before = cpu_ns(os.getpid())
    end = time.thread_time_ns() + 30_000_000
    while time.thread_time_ns() < end:
        pass
    assert cpu_ns(os.getpid()) - before >= 25_000_000
    assert cpu_ns(2**22 + 12345) is None  # no such process


def test_probe_calls_are_the_second_of_two_calls_on_the_same_inputs_after_a_warm_up():
    planner = ProbePlanner()
    a, b = [torch.randn(4, 8)], [torch.randn(4, 8)]
    out = [torch.empty(4, 8)]

    def call(model, inputs, launches=1, cpu=30_000_000):
        budget = planner.plan(model, inputs, out)
        planner.reported(launches, cpu)
        return budget

    assert call(1, a) == 0 and call(1, a) == 0  # the model's first call warms up: never half of a pair
    assert call(1, b) == 0 and call(1, [b[0].clone()]) == 10_000_000  # same contents, fresh memory: a probe of a third
    assert call(1, b) == 0  # a probe is never the ordinary half of the next pair
    assert call(2, b) == 0 and call(2, b) == 0  # another model: warms up first
    assert call(2, a, launches=4, cpu=1_000_000) == 0 and call(2, a) == PROBE_CALL_NS // 4  # at least PROBE_CALL_NS
    assert call(2, a, launches=0) == 0 and call(2, a) == 0  # nothing launched: nothing to probe
    for _ in range(4):
        call(3, b)
    assert planner.probes == MAX_PROBES


def test_probe_pairs_corroborate_or_contradict_the_reported_launches():
    honest = [ev.ProbePair(0.010, 0.0195, 1, 0.010), ev.ProbePair(0.012, 0.021, 1, 0.010),
              ev.ProbePair(0.011, 0.030, 2, 0.005)]
    level, how = ev.interpreted_launches(honest, "CPU time")
    assert level == ev.CORROBORATED and "in 3 probe call(s)" in how and "95%" in how
    forged = [ev.ProbePair(0.0010, 0.0011, 1, 0.004), ev.ProbePair(0.0012, 0.0009, 1, 0.004)]
    level, how = ev.interpreted_launches(forged, "CPU time")
    assert level == ev.CONTRADICTED and "(0%)" in how
    assert ev.interpreted_launches([], "CPU time")[0] == ev.UNVERIFIED
    edge = ev.CPU_LAUNCH_SHARE * 0.004
    assert ev.interpreted_launches([ev.ProbePair(0.001, 0.001 + edge * 1.01, 1, 0.004)], "x")[0] == ev.CORROBORATED
    assert ev.interpreted_launches([ev.ProbePair(0.001, 0.001 + edge * 0.99, 1, 0.004)], "x")[0] == ev.CONTRADICTED


def test_a_probes_baseline_is_the_cheapest_earlier_call_on_inputs_of_its_shapes():
    """An ordinary call a stall made 28 ms slower, right before each probe, leaves an honest probe corroborated (it
    read 29% against that call alone); a runner that burns nothing in its probes is still contradicted."""
    from workbench.eval.judge.evidence.stage import _interpreted
    from workbench.eval.judge.runners.session import CallRecord
    from workbench.eval.wire.runner_messages import LaunchReport

    def record(ms, probe_ms=0.0, shape=(37, 100)):
        report = LaunchReport(launches=1, kernels=("k",), outputs_launched=True)
        return CallRecord(report, (), ms / 1e3, cpu_ns=int(ms * 1e6), model=1, probe_ns=int(probe_ms * 1e6),
                          shapes=(shape,))

    def level(records):
        return _interpreted(types.SimpleNamespace(reports=records, probe_pair=lambda: None, probes=None))

    first = [record(84.0, shape=(64, 256)), record(45.0), record(44.0)]
    stalled = first + [x for _ in range(3) for x in (record(72.5), record(72.5 + 36.0 - 25.0, probe_ms=36.0))]
    assert level(stalled)[0] == ev.CORROBORATED, level(stalled)[1]
    forged = first + [x for _ in range(3) for x in (record(44.5), record(45.0, probe_ms=22.0))]
    assert level(forged)[0] == ev.CONTRADICTED, level(forged)[1]
    other_shape = [record(10.0, shape=(4, 4))] + forged[1:]  # a cheaper call on other inputs is no baseline
    assert level(other_shape)[0] == ev.CONTRADICTED


def test_probes_that_read_short_are_decided_by_larger_ones():
    """On a loaded host an honest probe can read short (its ordinary part cost 3 ms less than the call before it, a 4
    ms budget's margin is 2 ms): two larger probes (a whole call's CPU each) decide, and a runner that burns nothing
    still reads contradicted. Probes that corroborate cost no extra call."""
    from workbench.eval.judge.evidence.stage import _interpreted
    from workbench.eval.judge.runners.session import CallRecord
    from workbench.eval.wire.runner_messages import LaunchReport

    def session(first_ms, ordinary_ms, burns):
        """A session whose runner's ordinary calls cost `ordinary_ms` of CPU and whose probes burn `burns` of their
        budget; the check's calls already made: a warm-up, then ordinary/probe pairs costing `first_ms`."""
        planner, reports = ProbePlanner(), []
        inputs, out = [torch.ones(8)], [torch.empty(8)]

        def call(ms):
            probe_ns = planner.plan(1, inputs, out)
            cpu = int((ms + burns * probe_ns / 1e6) * 1e6)
            planner.reported(1, cpu)
            reports.append(CallRecord(LaunchReport(launches=1, kernels=("k",), outputs_launched=True), (), cpu / 1e9,
                                      cpu_ns=cpu, model=1, probe_ns=probe_ns, shapes=((8,),)))

        for ms in first_ms:
            call(ms)
        return types.SimpleNamespace(reports=reports, probes=planner, probe_pair=lambda: [call(ordinary_ms)
                                                                                           for _ in range(2)])

    # The check's calls: the model warms up, then three ordinary/probe pairs whose probes' own work ran 3 ms cheaper.
    loaded = [20.0] + [x for _ in range(3) for x in (8.0, 5.0)]
    honest = session(loaded, 8.0, burns=1.0)
    level, how = _interpreted(honest)
    assert level == ev.CORROBORATED and "smaller probes before them" in how and "(25%)" in how, how
    assert len(honest.reports) == 11 and honest.probes.probes == 5
    forger = session(loaded, 8.0, burns=0.0)
    level, how = _interpreted(forger)
    assert level == ev.CONTRADICTED and len(forger.reports) == 11, how
    quiet = session([20.0] + [8.0] * 6, 8.0, burns=1.0)
    assert _interpreted(quiet)[0] == ev.CORROBORATED and len(quiet.reports) == 7


def test_a_profile_corroborates_launches_only_with_own_kernels_an_intact_seal_and_the_judges_clock():
    own = {"softmax_kernel"}
    kernels = {"softmax_kernel": 80.0, "void at::native::vectorized_elementwise_kernel<4>(...)": 20.0}
    assert ev.profiled_launches(kernels, own, (), call_ms=0.2)[0] == ev.CORROBORATED
    assert ev.profiled_launches(None, own, (), None)[0] == ev.UNVERIFIED
    assert ev.profiled_launches(kernels, own, ("torch.profiler.profile.__exit__",), 0.2)[0] == ev.CONTRADICTED
    assert ev.profiled_launches({"ampere_sgemm": 50.0}, own, (), 0.2)[0] == ev.CONTRADICTED
    level, how = ev.profiled_launches({"softmax_kernel": 5000.0}, own, (), call_ms=1.0)
    assert level == ev.CONTRADICTED and "judge's clock" in how


def test_the_strict_policy_needs_corroborated_launches_and_contradicted_ones_reject_everywhere():
    def levels(launches: str) -> ev.Evidence:
        out = ev.Evidence()
        out.set("outputs", ev.JUDGE)
        out.set("launches", launches, "why")
        return out

    assert ev.findings(levels(ev.CORROBORATED), "strict", "triton") == []
    assert [f.flag for f in ev.findings(levels(ev.UNVERIFIED), "strict", "triton")] == ["unverified-evidence"]
    assert ev.findings(levels(ev.UNVERIFIED), "partial", "triton") == []
    assert ev.findings(levels(ev.NOT_APPLICABLE), "strict", "torch") == []
    for policy in ("strict", "partial"):
        assert [f.flag for f in ev.findings(levels(ev.CONTRADICTED), policy, "cuda")] == ["unverified-evidence"]


def test_the_result_names_its_evidence_in_one_line():
    res = Result(task="t", candidate_id="c", candidate_name="c", language="triton", status="ok",
                 evidence={"launches": "corroborated", "time": "judge", "outputs": "judge"})
    assert res.evidence_text() == "outputs judge · time judge · launches corroborated"
    assert Result.from_dict(res.to_dict()).evidence == res.evidence
    assert Result(task="t", candidate_id="c", candidate_name="c", language="x", status="ok").evidence_text() == ""


def test_the_verdict_card_and_kwb_eval_show_the_evidence_line():
    from widgets.verdict import result_html, stats_rows
    from workbench.cli.format import format_result

    res = Result(task="t", candidate_id="c", candidate_name="c", language="triton", status="ok",
                 evidence={"outputs": "judge", "launches": "unverified"})
    assert dict(stats_rows(res))["evidence"] == "outputs judge · launches unverified"
    assert "launches unverified" in result_html(res)
    lines = dict(line.split(None, 1) for line in format_result(res).splitlines() if " " in line.strip())
    assert lines["evidence"] == "outputs judge · launches unverified"
    assert "evidence" not in dict(stats_rows(Result(task="t", candidate_id="c", candidate_name="c", language="x",
                                                    status="ok")))


def test_idle_threads_are_not_thread_use_and_work_on_them_is_on_any_core_count():
    """CPU timing counts the work done on threads other than the runner's main thread, not how many exist: a machine
    with more cores gives the runtime more idle helpers (an honest softmax read "2 threads" on 16 cores), while a
    candidate's work on another thread is `thread-use` however short its batches, and on threads that exited before
    the judge looked too."""
    from workbench.eval.checks.runtime import CpuBatch, judge_cpu_share

    idle = [CpuBatch(0.010, 0.010, 0.010, 0.0), CpuBatch(0.012, 0.011, 0.011, 0.0002)]
    assert judge_cpu_share(idle) == []
    busy = [CpuBatch(0.010, 0.012, 0.008, 0.004)] * 2  # each batch under the slack, together over it
    assert judge_cpu_share(busy) == [] and [f.flag for f in judge_cpu_share(busy, sum(busy[1:], busy[0]))] == \
        ["thread-use"]
    assert [f.flag for f in judge_cpu_share([CpuBatch(0.2, 0.2, 0.15, 0.05)])] == ["thread-use"]
    gone = [CpuBatch(0.1, 0.15, 0.08, 0.0)] * 3  # 70 ms a batch on threads that exited before the judge looked
    assert [f.flag for f in judge_cpu_share(gone)] == ["thread-use"]
    rounding = [CpuBatch(0.02, 0.03, 0.02, 0.0)] * 30  # a tick over each batch's clock: rounding, whatever the count
    assert judge_cpu_share(rounding, CpuBatch(0.6, 0.61, 0.6, 0.0)) == []
    ticks = [CpuBatch(0.1, 0.11, 0.1, 0.0)]  # one 10 ms tick beyond the main thread's clock: rounding, not work
    assert judge_cpu_share(ticks) == []
    assert [f.flag for f in judge_cpu_share([CpuBatch(0.2, 0.5, 0.5, 0.0)])] == ["thread-use"]  # more than a core
