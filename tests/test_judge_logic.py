"""The judge's decisions, on a scripted runner (`tests/fake_runner.py`): the stages, the status of every fault, the
correctness checks that compare numbers, the timing's verdicts and clock check, the judge's caches, and the caller's
inability to change a status. Each evaluation runs in this process in well under a few seconds: no fork server, no
sandbox, no candidate import; what the candidate does is the script's."""

from __future__ import annotations

import math

import pytest
import torch
from engine_tasks import SOFTMAX, softmax_task
from fake_runner import Die, Raise, Script, Violate, candidate_of, fake_context, fake_job, judge_fake, write_ceilings

import workbench as wb
from workbench.eval.runner.poison import junk_fill_flag
from workbench.eval.wire.runner_messages import Call, LaunchReport

#: Memory a candidate never wrote holds the poison only where torch's CPU allocator can junk-fill.
needs_poison = pytest.mark.skipif(junk_fill_flag() is None, reason="this torch build has no CPU junk fill")


@pytest.fixture(scope="module")
def task() -> wb.Task:
    return softmax_task()


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _bound(y: torch.Tensor) -> torch.Tensor:
    """The float32 tolerance of `tiny_softmax` at each element (atol + rtol |y|: 1e-5 each), which the error budget
    uses where k x the native error is smaller (always, for a float32 softmax)."""
    return 1e-5 + 1e-5 * y.abs()


def _calls(ctx) -> int:
    """Correctness calls the evaluation's candidate runner was asked for."""
    return sum(isinstance(m, Call) for m in ctx.runner_class.runners[0].received)


@pytest.fixture
def fast_roof(tmp_path, monkeypatch):
    """Ceilings under which no timing here is near the physical floor (a measurement would take seconds)."""
    write_ceilings(tmp_path, copy_bandwidth=1e11, matmul_flops=1e12)
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))


@pytest.fixture
def slow_roof(tmp_path, monkeypatch):
    """Ceilings of a machine that copies 10 kB/s with no cache: tiny_softmax's 4 kB take 356 ms at the least."""
    write_ceilings(tmp_path, copy_bandwidth=1e4, matmul_flops=1e9, cache_levels=[[1, 64]])
    monkeypatch.setenv("KWB_CACHE_DIR", str(tmp_path))


# ---- the stages and an honest candidate -------------------------------------------------------------------------

def test_an_honest_candidate_goes_through_every_stage_in_order(task):
    """The stages as they end (calibrate is inside load, the first evidence inside the check's assessment), and an
    honest Triton candidate's verdict: ok, launches corroborated by the probe calls, timed on the interpreter."""
    res = judge_fake(task, Script())
    assert res.status == "ok", res.message
    assert list(res.stage_seconds) == ["scan", "calibrate", "load", "check", "evidence", "count", "time", "verdict"]
    assert res.evidence["outputs"] == "judge" and res.evidence["launches"] == "corroborated"
    assert res.timing is not None and res.timing.clock == "interpreter" and res.speedup is None
    assert res.sandbox == "fake" and res.protocol["reference_cache"] == "miss"


# ---- every fault's status ------------------------------------------------------------------------------------

def _raises(x):
    rows = x.shape[0]
    raise ValueError(f"{rows} rows: rows must be even")


def _out_of_memory(x):
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")


def _cuda_fault(x):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_a_kernel_that_does_not_compile_is_a_compile_error(task):
    res = judge_fake(task, Script(events=(Raise("load", "CompilationError", "at 3:4: unsupported tensor index"),)),
                     time_it=False)
    assert res.status == "compile_error" and "unsupported tensor index" in res.message
    assert list(res.stage_seconds) == ["scan", "load"]


def test_an_import_past_the_compile_budget_is_a_timeout(task):
    res = judge_fake(task, Script(load_s=30.0), compile_timeout=0.3, time_it=False)
    assert res.status == "timeout"
    assert "compile budget of 0.3 s" in res.message


def test_an_exception_in_forward_is_a_runtime_error_at_the_candidates_line(task):
    res = judge_fake(task, Script(forward=_raises), time_it=False)
    assert res.status == "runtime_error"
    assert res.message.startswith("forward raised ValueError: 8 rows: rows must be even")
    assert "in _raises: raise ValueError(" in res.message  # the line, from the runner's traceback


@pytest.mark.parametrize("forward, said", [(_out_of_memory, "out of memory during forward"),
                                           (_cuda_fault, "CUDA fault during forward")])
def test_out_of_memory_and_cuda_faults_are_explained(task, forward, said):
    res = judge_fake(task, Script(forward=forward), time_it=False)
    assert res.status == "runtime_error" and res.message.startswith(said), res.message


def test_a_constructor_that_raises_is_a_runtime_error_of_init(task):
    res = judge_fake(task, Script(forward=softmax, events=(Raise("init", "TypeError", "takes 2 arguments"),)),
                     time_it=False)
    assert res.status == "runtime_error" and res.message == "init raised TypeError: takes 2 arguments"


def test_a_crash_at_a_given_call_is_crashed_with_its_signal_and_line(task):
    ctx = fake_context()
    log = 'Fatal Python error: Segmentation fault\n  File "/tmp/kwb_candidate_1.py", line 20 in forward'
    res = judge_fake(task, Script(forward=softmax, events=(Die("forward", at=3, log=log),)), context=ctx,
                     time_it=False)
    assert res.status == "crashed" and _calls(ctx) == 3
    assert res.message.startswith("crashed: runner process killed by SIGSEGV (segmentation fault")
    assert "at candidate line 20 in forward: x = x.contiguous()" in res.message  # the line, from the source
    assert res.metadata["judge_pid"] and res.log.endswith("line 20 in forward")


def test_a_runner_that_stops_answering_at_a_given_call_is_a_timeout(task):
    ctx = fake_context()
    res = judge_fake(task, Script(forward=softmax, events=(Die("forward", "timeout", at=2),)), context=ctx,
                     timeout=0.5, time_it=False)
    assert res.status == "timeout" and _calls(ctx) == 2
    assert res.message.startswith("timeout: no result within 0.5 s (the runner was killed)")


@pytest.mark.parametrize("how, said", [("replay", "sequence number"), ("nonce", "wrong job id or nonce"),
                                       ("kind", "unexpected message kind 'pong'"), ("garbage", "not a protocol frame")])
def test_a_message_outside_the_protocol_is_a_protocol_violation(task, how, said):
    res = judge_fake(task, Script(forward=softmax, events=(Violate("forward", how, at=2),)), time_it=False)
    assert res.status == "rejected" and res.flags == ["protocol-violation"]
    assert said in res.message


def test_a_fault_while_timing_is_a_runtime_error_of_timing(task):
    res = judge_fake(task, Script(forward=softmax, events=(Raise("timing", "RuntimeError", "lost the device"),)))
    assert res.status == "runtime_error" and res.message == "timing raised RuntimeError: lost the device"


def test_a_task_whose_reference_raises_fails_as_the_task(task):
    broken = wb.Task.from_source(SOFTMAX.replace("return torch.softmax(x, dim=-1)",
                                                 "raise ZeroDivisionError('the reference divides by zero')"),
                                 name="broken_softmax")
    res = judge_fake(broken, Script(forward=softmax), time_it=False)
    assert res.status == "runtime_error"
    assert res.message.startswith("the task failed:") and "the reference divides by zero" in res.message


# ---- what the comparison of numbers catches ---------------------------------------------------------------------

def _mutates(x):
    y = torch.softmax(x, dim=-1)
    x.mul_(2.0)
    return y


def _tail_unwritten(x):
    """The last quarter of each row never written (a grid one block short)."""
    y = torch.empty_like(x)
    cols = 3 * x.shape[1] // 4
    y[:, :cols] = torch.softmax(x, dim=-1)[:, :cols]
    return y


def _racy():
    """Two calls on the same inputs land on either side of the reference, each within its tolerance."""
    calls = [0]

    def forward(x):
        calls[0] += 1
        y = torch.softmax(x, dim=-1)
        return y + (0.7 if calls[0] % 2 else -0.7) * _bound(y)

    return forward


@pytest.mark.parametrize("forward, status, flag", [
    (lambda x: torch.zeros_like(x), "rejected", "degenerate-output"),
    (lambda x: torch.full_like(x, 1.0 / x.shape[-1]), "rejected", "degenerate-output"),
    pytest.param(lambda x: torch.empty_like(x), "rejected", "stale-memory", marks=needs_poison),
    pytest.param(_tail_unwritten, "incorrect", "unwritten-output", marks=needs_poison),
    (_mutates, "rejected", "input-mutation"),
    (_racy(), "incorrect", "nondeterministic"),
    (lambda x: torch.softmax(x, -1)[:, :-1], "incorrect", "wrong-shape"),
    (lambda x: torch.softmax(x, -1).double(), "incorrect", "wrong-dtype"),
    (lambda x: torch.softmax(x, -1).tolist(), "incorrect", "wrong-type"),
    (lambda x: torch.softmax(x, -1) * float("nan"), "incorrect", "non-finite"),
], ids=["zeros", "constant", "unwritten", "partly-unwritten", "mutation", "nondeterministic", "shape", "dtype",
        "type", "nan"])
def test_a_wrong_output_is_caught_by_comparing_numbers(task, forward, status, flag):
    res = judge_fake(task, Script(forward=forward), time_it=False)
    assert res.status == status and flag in res.flags, (res.flags, res.message)


@pytest.mark.parametrize("share, status", [(0.3, "ok"), (3.0, "incorrect")])
def test_the_error_budget_passes_a_small_error_and_fails_a_larger_one(task, share, status):
    """An error of `share` times each element's bound: within the budget it passes, beyond it is a `mismatch`; the
    budget's record adds up either way (its native bound is k times the native error)."""
    res = judge_fake(task, Script(forward=lambda x: softmax(x) + share * _bound(softmax(x))), time_it=False)
    assert res.status == status, res.message
    budget = res.error_budget
    assert budget["k"] == 16.0 and budget["native_bound"] == pytest.approx(budget["k"] * budget["native_error"])
    assert budget["worst_ratio"] == pytest.approx(share, rel=0.05)
    assert (res.flags == ["mismatch"]) == (status == "incorrect")


# ---- what the runner reports ------------------------------------------------------------------------------------

@pytest.mark.parametrize("script, flag", [
    (Script(forward=softmax, launch=LaunchReport(0, ("softmax_kernel",), False)), "decoy-kernel"),
    (Script(forward=softmax, launch=LaunchReport(1, ("softmax_kernel",), False)), "decoy-kernel"),
    (Script(forward=softmax, threads_left=("worker-1",)), "thread-deferral"),
], ids=["no-launch", "output-not-launched", "thread-left"])
def test_what_the_runner_reports_of_the_launches_is_judged(task, script, flag):
    """A Triton candidate that launched none of its kernels, or returned what no launch wrote, is a decoy; one that
    left a thread running deferred its work past the call."""
    res = judge_fake(task, script, time_it=False)
    assert res.status == "rejected" and res.flags == [flag], res.message


# ---- timing ---------------------------------------------------------------------------------------------------

def _steady(ms: float):
    """`ms` per call, with a small deterministic ripple (identical samples would make every spread zero)."""
    return lambda k: ms * (1.0 + 0.002 * (k % 3))


@pytest.mark.parametrize("candidate_ms, verdict, ratio", [(10.0, "faster", 2.0), (40.0, "slower", 0.5),
                                                          (20.0, "same", 1.0)])
def test_the_speedup_verdict_follows_the_samples(task, fast_roof, candidate_ms, verdict, ratio):
    """Both sides timed in scripted runners (the reference in a runner of its own, the default) at 20 ms a call
    against the candidate's: the paired verdict reads the ratio of their rounds. Forty timed calls: the judge's clock
    around the scripted sleeps is noisy on a loaded machine, and fewer rounds left "same" inconclusive there."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=_steady(candidate_ms)),
                     reference=Script(ms=_steady(20.0)), reps=40)
    assert res.status == "ok", res.message
    assert res.protocol["reference_timed_in"] == "runner"
    assert res.speedup_verdict == verdict and res.speedup == pytest.approx(ratio, rel=0.25)
    assert res.protocol["timed_batches"] >= 10


def test_a_fixed_count_of_timed_calls_stops_timing(task, fast_roof):
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=20.0), reps=7)
    assert res.status == "ok", res.message
    assert res.timing.n == res.reference_timing.n == 7
    assert res.timing.stop_reason == res.reference_timing.stop_reason == "fixed"


@pytest.mark.parametrize("share, status", [(0.0, "ok"), (0.02, "ok"), (0.5, "rejected")])
def test_work_on_threads_besides_the_runners_own_is_thread_use_however_many_exist(task, fast_roof, share, status):
    """CPU timing counts the CPU the runner's other threads used, not how many there are: three idle helper threads
    (a runtime on a many-core machine) are fine, half the work on another thread is `thread-use`."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=20.0, cpu_threads=4, off_main_share=share),
                     reps=6)
    assert res.status == status, res.message
    assert status == "ok" or (res.flags == ["thread-use"] and "threads other than the runner's own" in res.message)


def test_a_time_below_the_physical_floor_is_rejected_by_the_judge(task, slow_roof):
    """The judge's last checkpoint (`verdict.physics`), on its own ceilings: a candidate that takes 20 ms a call (by
    its runner's clock and the judge's alike) is below half the 356 ms the task's bytes take on this machine."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=20.0), reps=6)
    assert res.status == "rejected" and res.flags == ["faster-than-physics"], res.message
    assert "floor 356.2 ms on cpu (test ceilings) measured" in res.message
    assert "a time below 0.5 x floor is impossible" in res.message
    assert "verdict" in res.stage_seconds and res.timing.median_ms < 100.0


def test_a_runner_clock_far_below_the_judges_is_a_timer_patch(task, fast_roof):
    """5 ms a call by the judge's clock, 0.01 ms reported: more than GROSS_SHORTFALL (4x on the CPU) apart."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=0.01, spend_ms=5.0), reps=10)
    assert res.status == "rejected" and res.flags == ["timer-patch"]
    assert "by the judge's clock a timed call costs" in res.message and "reported 0.0100 ms" in res.message
    check = res.protocol["clock_check"]
    assert not check["verified"] and not check["disagreed"] and check["judge_ms"] > 3.0  # 5 ms, less a loaded null fit


def test_a_host_that_wakes_the_judge_late_is_not_a_timer_patch(task, fast_roof):
    """Every reply held 30 ms after an honest 2 ms batch (a loaded 2-core host): the judge's clock reads far over the
    report, but the runner's CPU seconds agree with it, so both sides go on the judge's clock; nothing is rejected."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=2.0, stall_ms=30.0), reps=4)
    assert res.status == "ok" and res.flags == [], res.message
    check = res.protocol["clock_check"]
    assert check["disagreed"] and check["judge_ms"] > 4 * 2.0 + 8.0
    # The scripted 2 ms, stretched by what a loaded host took from the batch itself, never by the stall after it.
    assert 1.6 <= check["reported_ms"] < check["judge_ms"] - 8.0


def test_a_runner_clock_somewhat_below_the_judges_hands_timing_to_the_judges_clock(task, fast_roof):
    """20 ms a call by the judge's clock, 10 ms reported: a disagreement short of a gross one times both sides on
    the judge's clock (never below what the runner reported), and the Result says so."""
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=10.0, spend_ms=20.0), reps=10)
    assert res.status == "ok", res.message
    check = res.protocol["clock_check"]
    assert check["disagreed"] and not check["verified"] and check["reported_ms"] == pytest.approx(10.0)
    assert res.protocol["timing_basis"] == "the judge's clock"
    assert res.timing.median_ms > 1.5 * check["reported_ms"]  # the judge's figure, not the runner's
    assert any("did not agree with the judge's" in n for n in res.details["notes"])


def test_a_runner_reporting_more_than_its_batch_took_is_a_timer_patch(task, fast_roof):
    res = judge_fake(task, Script.baseline_torch(forward=softmax, ms=20.0, spend_ms=5.0), reps=10)
    assert res.status == "rejected" and res.flags == ["timer-patch"]
    assert "of work in a batch the judge's clock measured at" in res.message


# ---- what the judge keeps -------------------------------------------------------------------------------------

def test_a_second_candidate_of_the_task_reuses_the_reference_rounds(task):
    ctx = fake_context()
    first = judge_fake(task, Script(forward=softmax), context=ctx, time_it=False)
    second = judge_fake(task, Script(forward=_raises), context=ctx, time_it=False)
    third = judge_fake(task, Script(forward=softmax), context=ctx, time_it=False)
    assert first.status == third.status == "ok" and second.status == "runtime_error"
    assert first.protocol["reference_cache"] == "miss"
    assert third.protocol["reference_cache"] == "hit"
    assert third.max_abs_err == first.max_abs_err  # the same rounds, the same candidate


# ---- the caller ----------------------------------------------------------------------------------------------

def test_the_caller_never_changes_the_judges_status(task, slow_roof):
    """A reply the judge called "ok" whose time is far below the physical floor: the caller annotates the roofline
    numbers and leaves the status, flags and message as the judge decided them (`evaluate._annotate`)."""
    from workbench.eval.evaluate import _annotate
    from workbench.eval.judge.ceilings import measured_ceilings
    from workbench.eval.results import result_from_reply
    from workbench.eval.wire.judge_messages import Reply
    from workbench.result import Timing

    script = Script.baseline_torch(forward=softmax)
    job = fake_job(task, script)
    timing = Timing(median_ms=1e-3, min_ms=1e-3, max_ms=1e-3, iqr_ms=0.0, ci95_low_ms=1e-3, ci95_high_ms=1e-3, n=50,
                    clock="wall")
    ceilings, _ = measured_ceilings("cpu", "cpu", "wall")
    reply = Reply(status="ok", message="all checks passed", timing=timing, reference_timing=timing,
                  counted={"flops": 2048.0, "bytes": 4096.0}, ceilings=ceilings)
    res = result_from_reply(task, candidate_of(script), job, reply)
    _annotate(res, task, reply)
    assert (res.status, res.flags, res.message) == ("ok", [], "all checks passed")
    floor = res.metadata["physics_floor_ms"]
    assert math.isfinite(floor) and floor > 1e5 * timing.median_ms  # the roofline saw it, and said nothing
