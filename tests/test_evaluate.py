"""evaluate(): statuses, timing labels, sizes and the Result record, end to end through a real worker."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_tasks import softmax_task

import workbench as wb
from workbench.eval.judge.timing.pair import INTERPRETED_CALLS

FAULTS = Path(__file__).parent / "faults"
TASK = softmax_task()
HONEST = (FAULTS / "honest_softmax.py").read_text()


def test_honest_triton_kernel_is_ok_with_interpreter_timing_and_no_speedup():
    result = wb.evaluate(TASK, wb.Candidate(source=HONEST, language="triton", name="honest"), device="cpu")
    assert result.status == "ok", result.message
    assert result.flags == []
    # A fixed few timed calls on the interpreter, each one's output re-checked: its time decides no verdict.
    assert result.timing.clock == "interpreter" and result.timing.n == INTERPRETED_CALLS == 2
    assert result.protocol["timed_batches"] == INTERPRETED_CALLS and result.evidence["launches"] == "corroborated"
    assert result.timing.min_ms <= result.timing.median_ms <= result.timing.max_ms
    assert result.timing.ci95_low_ms <= result.timing.median_ms <= result.timing.ci95_high_ms
    assert result.reference_timing is None and result.speedup is None  # never beside an interpreter time
    assert "interpreter" in result.message
    assert result.max_abs_err is not None and result.max_abs_err < 1e-5
    # Correctness ran >= 5 rounds over several sizes and distributions.
    rounds = result.details["rounds"]
    assert len(rounds) >= 5
    assert len({str(r["size"]) for r in rounds}) >= 2 and len({r["dist"] for r in rounds}) >= 4
    assert result.versions["torch"] and result.device == "cpu" and result.source_hash == result.candidate_id


def test_result_round_trips_through_a_dict():
    result = wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cpu", time_it=False)
    again = wb.Result.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict()


def test_torch_candidate_on_cpu_gets_a_wall_clock_free_comparison():
    src = "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
          "        e = torch.exp(x - x.amax(-1, keepdim=True))\n        return e / e.sum(-1, keepdim=True)\n"
    result = wb.evaluate(TASK, wb.Candidate(source=src, language="torch"), device="cpu")
    assert result.status == "ok", result.message
    # PyTorch code is compiled code even on a CPU worker: wall clock, and a speedup against the reference.
    assert result.timing.clock == "wall" and result.speedup is not None and result.speedup > 0


def test_fp16_arithmetic_fails_an_fp32_task():
    src = "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
          "        return torch.softmax(x.half(), -1).float()\n"
    result = wb.evaluate(TASK, wb.Candidate(source=src, language="torch"), device="cpu", time_it=False)
    assert result.status == "incorrect" and "mismatch" in result.flags
    assert result.max_rel_err > 1e-4


def test_stale_memory_and_zeros_are_rejected_with_named_flags():
    stale = "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
            "        return torch.empty_like(x)\n"
    res = wb.evaluate(TASK, wb.Candidate(source=stale, language="torch"), device="cpu", time_it=False)
    assert res.status != "ok" and "stale-memory" in res.flags, res.flags
    zeros = stale.replace("empty_like", "zeros_like")
    res = wb.evaluate(TASK, wb.Candidate(source=zeros, language="torch"), device="cpu", time_it=False)
    assert res.status == "rejected" and "degenerate-output" in res.flags


def test_bf16_sizes_run_in_fp32_on_the_interpreter_with_a_visible_warning():
    task = wb.get_task("vector_add")
    size = {**task.size("cpu"), "dtype": "bfloat16"}
    res = wb.evaluate(task, task.solution_candidate(), device="cpu", size=size, time_it=False)
    assert res.status == "ok", res.message
    assert "interpreter-bf16" in res.warnings
    assert any("bf16" in n for n in res.details["notes"])


def test_explicit_dtype_is_checked_in_that_dtype():
    task = wb.get_task("softmax")
    size = {**task.size("cpu"), "dtype": "float16"}
    res = wb.evaluate(task, task.solution_candidate(), device="cpu", size=size, time_it=False)
    assert res.status == "ok", res.message
    assert all(r["size"].get("dtype") == "float16" for r in res.details["rounds"])


def test_task_name_and_source_string_are_accepted_and_store_gets_the_row(tmp_path):
    store = wb.Store(str(tmp_path / "r.db"))
    res = wb.evaluate("vector_add", wb.get_task("vector_add").solution, device="cpu", store=store, time_it=False)
    assert res.status == "ok"
    frame = store.frame()
    assert len(frame) == 1 and frame.iloc[0]["status"] == "ok"


def test_evaluate_many_keeps_order_and_statuses():
    bad = HONEST.replace("e / tl.sum(e, 0)", "e")
    results = wb.evaluate_many(TASK, [wb.Candidate(source=HONEST), wb.Candidate(source=bad)], device="cpu",
                               progress=False, time_it=False)
    assert [r.status for r in results] == ["ok", "incorrect"]
    assert results[0].metadata["judge_pid"] == results[1].metadata["judge_pid"] is not None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_asking_for_a_missing_gpu_is_the_callers_error_not_a_result():
    with pytest.raises(wb.WorkbenchError, match="no usable CUDA device"):
        wb.evaluate(TASK, wb.Candidate(source=HONEST), device="cuda")
    with pytest.raises(wb.WorkbenchError, match="unknown device"):
        wb.evaluate(TASK, wb.Candidate(source=HONEST), device="tpu")


_DEEP = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A hundred weights travel to the runner as a hundred buffers: more descriptors than one frame holds."""

    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(1.0 + 0.001 * torch.randn(8)) for _ in range(100)])

    def forward(self, x):
        for scale in self.scales:
            x = x * scale
        return x


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_a_model_with_hundreds_of_weight_buffers_reaches_the_runner_and_is_judged_like_itself():
    from workbench.tasks.kernelbench import reference_as_candidate

    task = wb.Task.from_source(_DEEP, name="deep_linear", sweep={"cpu": [{}]})
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert res.status == "ok", res.message
    assert 0.5 < res.speedup < 2.0, res.speedup


# A reference in KernelBench's LSTM style: its initial state is drawn with torch.randn inside forward.
_RANDOM_STATE = '''
import torch
import torch.nn as nn

batch_size = 4
seq_len = 6
input_size = 8
hidden_size = 16


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rnn = nn.GRU(input_size, hidden_size, batch_first=True)

    def forward(self, x):
        h0 = torch.randn(1, x.shape[0], self.rnn.hidden_size, device=x.device)
        out, _ = self.rnn(x, h0)
        return out[:, -1]


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
'''

_ZERO_STATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rnn = nn.GRU(input_size, hidden_size, batch_first=True)

    def forward(self, x):
        out, _ = self.rnn(x)  # a zero initial state: not the reference's function
        return out[:, -1]
'''


def test_a_reference_that_draws_random_numbers_in_forward_is_judged_like_itself():
    """Every call of a correctness round, and each timed rep with its re-check, starts from one seed on both sides
    of the boundary (as KernelBench seeds before each call): identical code is ok, with timing and its re-check of
    committed outputs; a candidate that leaves the random state out still fails."""
    from workbench.tasks.kernelbench import reference_as_candidate

    task = wb.Task.from_source(_RANDOM_STATE, name="random_state_gru", sweep={"cpu": [{}]})
    same = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    assert same.status == "ok" and same.flags == [], same.message
    assert same.protocol["checked_timed_calls"] >= 2 and 0.5 < same.speedup < 2.0, (same.protocol, same.speedup)
    zero = wb.evaluate(task, wb.Candidate(source=_ZERO_STATE, language="torch"), device="cpu", time_it=False)
    assert zero.status == "incorrect" and "mismatch" in zero.flags, zero.message


COMPILED_GELU = '''
import torch


class ModelNew(torch.nn.Module):
    """The reference's GELU through torch.compile (Inductor), as published agents submit compiled baselines."""

    def __init__(self):
        super().__init__()
        self.fn = torch.compile(lambda x: torch.nn.functional.gelu(x), dynamic=True)

    def forward(self, x):
        return self.fn(x)
'''


def test_a_torch_compile_candidate_leaves_no_compile_pool_or_monitor_thread_behind():
    """Inductor's compile pool and tqdm's monitor are the library's threads, not work deferred past the timer: the
    runner has Inductor compile in the calling thread and tqdm start no monitor, so the honest candidate is ok."""
    task = wb.get_task("gelu")
    res = wb.evaluate(task, wb.Candidate(COMPILED_GELU, language="torch"), device="cpu", time_it=False)
    assert res.status == "ok" and "thread-deferral" not in res.flags, res.message
