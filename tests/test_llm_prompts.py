"""Prompt templates, code extraction from replies, and feedback channels rendered from Results."""

from __future__ import annotations

import pytest
from llm_server import CHEAT, HONEST_FAST, TINY_SOURCE, reply

from workbench.errors import UnknownNameError
from workbench.llm import (
    FEEDBACK_PRESETS,
    NO_CODE_FOUND,
    FeedbackOptions,
    extract_code,
    feedback_options,
    generation_prompt,
    mutation_prompt,
    refine_prompt,
    render_history,
    render_result,
)
from workbench.result import Result, Timing
from workbench.tasks.task import Task, get_task


@pytest.fixture(scope="module")
def tiny() -> Task:
    return Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 2, "N": 256})


def test_generation_prompt_carries_the_task(tiny):
    prompt = generation_prompt(tiny, "triton", device="cpu")
    text = prompt.text
    assert "def forward(self, a, b):\n        return a + b" in text  # the reference, verbatim
    assert "M=2, N=256" in text and "float32" in text
    assert "Triton interpreter" in text  # device description for CPU runs
    assert "class ModelNew(torch.nn.Module)" in text and "@triton.jit" in text
    assert "Triton kernels" in prompt.system
    assert prompt.template == "triton/generate" and len(prompt.id) == 12
    assert generation_prompt(tiny, "triton", device="cpu").id == prompt.id  # stable
    bigger = Task.from_source(TINY_SOURCE, name="tiny_add", sizes={"M": 4, "N": 256})
    assert generation_prompt(bigger, "triton", device="cpu").id != prompt.id


def test_builtin_task_prompt_drops_workbench_metadata_and_lists_check_sizes():
    task = get_task("vector_add")
    text = generation_prompt(task, "triton", device="cpu").text
    assert "class Model(nn.Module)" in text and "builtin_task" not in text
    for size in task.check_sizes("cpu")[1:]:
        assert ", ".join(f"{k}={v}" for k, v in size.items()) in text


def test_cuda_template_and_unknown_language(tiny):
    text = generation_prompt(tiny, "cuda", device="cpu").text
    assert "load_inline" in text and "__global__" in text and "@triton.jit" not in text
    with pytest.raises(UnknownNameError, match="known prompt languages: cuda, cute, helion, triton"):
        generation_prompt(tiny, "fortran")


def test_extract_picks_the_block_defining_modelnew():
    text = ("Plan:\n```python\nimport torch\nBLOCK = 4\n```\nFinal:\n" + reply(CHEAT).split("\n", 1)[1]
            + "\nand a revision:\n```py\n" + HONEST_FAST + "```\n```bash\npip install triton\n```")
    got = extract_code(text)
    assert got.ok and got.outcome == "ok" and got.blocks == 4
    assert got.code == HONEST_FAST  # the last block that defines ModelNew wins
    assert "2 blocks define" in got.note


def test_extract_handles_cut_replies_and_bare_code():
    cut = "Here:\n```python\n" + HONEST_FAST[:-40]  # max_tokens hit mid-block: no closing fence
    got = extract_code(cut)
    assert got.ok and got.code.startswith("BLOCK_SIZE = 512")
    assert extract_code(HONEST_FAST).code == HONEST_FAST  # bare code without a fence


def test_no_code_found_outcome():
    none = extract_code("I would tile the loop and use shared memory.")
    assert not none.ok and none.outcome == NO_CODE_FOUND and "no fenced" in none.note
    other = extract_code("```cpp\n__global__ void k() {}\n```\n```python\nprint('no model here')\n```")
    assert other.outcome == NO_CODE_FOUND and "2 fenced block(s) (cpp, python)" in other.note


def _failed() -> Result:
    return Result(task="t", candidate_id="c1", candidate_name="c1", language="triton", status="runtime_error",
                  message="RuntimeError: illegal memory access in add_kernel", log="line 1\nline 2: boom")


def _passed() -> Result:
    timing = Timing(2.0, 1.9, 2.5, 0.1, 1.95, 2.05, 50, "cuda-events")
    return Result(task="t", candidate_id="c2", candidate_name="c2", language="triton", status="ok", timing=timing,
                  reference_timing=Timing(3.0, 2.9, 3.1, 0.1, 2.95, 3.05, 50, "cuda-events"), speedup=1.5,
                  max_abs_err=2e-7, sol_fraction=0.42, bound="memory", achieved_bytes_per_s=1.2e12,
                  details={"ncu": {"dram__bytes.sum": 123456}})


def _rejected() -> Result:
    return Result(task="t", candidate_id="c3", candidate_name="c3", language="triton", status="rejected",
                  flags=["no-custom-kernel"], message="static check failed")


def test_each_feedback_channel_switches_its_own_text():
    full = FeedbackOptions()
    text = render_result(_failed(), full)
    assert "Verdict: runtime_error" in text and "illegal memory access" in text and "boom" in text
    assert "illegal memory access" not in render_result(_failed(), full.with_(errors=False))

    ok = render_result(_passed(), full)
    assert "speedup 1.5x" in ok and "42.0% of speed-of-light" in ok and "memory-bound" in ok
    assert "max abs error 2e-07" in ok and "dram__bytes.sum=123456" in ok
    assert "speedup" not in render_result(_passed(), full.with_(timing=False))
    assert "speed-of-light" not in render_result(_passed(), full.with_(roofline=False))
    assert "dram__bytes" not in render_result(_passed(), full.with_(ncu=False))
    assert "max abs error" not in render_result(_passed(), full.with_(correctness=False))

    rej = render_result(_rejected(), full)
    assert "[no-custom-kernel]" in rej and "Fix:" in rej
    # the verdict line survives every switch being off
    assert render_result(_rejected(), FEEDBACK_PRESETS["none"]).strip() == \
        "Verdict: rejected (failed checks: no-custom-kernel)"


def test_history_depth_and_presets():
    attempts = [("n00", _failed()), ("n01", _rejected()), ("n02", _passed())]
    assert render_history(attempts, FeedbackOptions(history_depth=0)) == ""
    two = render_history(attempts, FeedbackOptions(history_depth=2)).splitlines()
    assert len(two) == 2 and two[0].startswith("- n01: rejected") and "speedup 1.5x" in two[1]
    assert feedback_options("errors").label == "errors/h0"
    assert FeedbackOptions().label == "errors+correctness+timing+roofline+ncu/h2"
    assert feedback_options({"timing": False}).timing is False
    with pytest.raises(UnknownNameError, match="feedback preset"):
        feedback_options("everything")


def test_refine_and_mutation_prompts_quote_parent_and_feedback(tiny):
    feedback = render_result(_failed(), FeedbackOptions())
    prompt = refine_prompt(tiny, HONEST_FAST, feedback, history="- n00: rejected", parent_label="n01, runtime_error",
                           device="cpu")
    assert HONEST_FAST.strip() in prompt.text and "illegal memory access" in prompt.text
    assert "Earlier attempts:\n- n00: rejected" in prompt.text and "Fix it" in prompt.text
    assert prompt.template == "triton/refine"
    better = refine_prompt(tiny, HONEST_FAST, "Verdict: ok", parent_ok=True, device="cpu")
    assert "Make it faster" in better.text and better.id != prompt.id
    mutated = mutation_prompt(tiny, HONEST_FAST, "Verdict: ok", "retune the block sizes", device="cpu")
    assert "changes this: retune the block sizes." in mutated.text and mutated.template == "triton/mutate"


def test_tracebacks_keep_the_candidates_frames_under_a_stable_name():
    from workbench.llm.feedback import clean_trace

    trace = (
        "Traceback (most recent call last):\n"
        '  File "/work/main/workbench/check.py", line 238, in _call\n'
        "    return model(*inputs)\n"
        '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
        "    return self._call_impl(*args, **kwargs)\n"
        '  File "/tmp/kwb_cand_x1/kwb_candidate_3_123.py", line 26, in forward\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom"
    )
    assert clean_trace(trace) == (
        "Traceback (most recent call last):\n"
        '  File "candidate.py", line 26, in forward\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom"
    )
    result = Result(task="t", candidate_id="c", candidate_name="c", language="triton", status="runtime_error",
                    message="forward raised RuntimeError: boom", log=trace)
    text = render_result(result, FeedbackOptions())
    assert "candidate.py" in text and "site-packages" not in text and "kwb_cand_x1" not in text
