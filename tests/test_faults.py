"""The fault corpus: every broken candidate gets the right status and a message naming the cause, the calling
process survives, and the next evaluation in the same session works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb

FAULTS = Path(__file__).parent / "faults"
TASK = softmax_task()

# file -> (expected status, words the message must contain)
CORPUS = {
    "syntax_error.py": ("compile_error", ["syntax error at line 5", "class ModelNew(nn.Module)"]),
    "missing_entry.py": ("compile_error", ["defines no ModelNew", "Softmax"]),
    "missing_package.py": ("compile_error", ["No module named 'kwb_no_such_package_here'", "line 4",
                                             "Fix: install 'kwb_no_such_package_here' into the environment"]),
    "forward_exception.py": ("runtime_error", ["ZeroDivisionError", "candidate line 7 in forward", "x.shape[1] / 0"]),
    "infinite_loop.py": ("timeout", ["no result within 5 s", "infinite loop"]),
    "segfault.py": ("crashed", ["SIGSEGV", "segmentation fault", "candidate line 9 in forward: ctypes.string_at(0)"]),
    "huge_allocation.py": ("runtime_error", ["out of memory", "candidate line 7 in forward", "Allocate less"]),
    "wrong_shape.py": ("incorrect", ["wrong-shape", "(8, 63)", "expected (8, 64)"]),
    "wrong_dtype.py": ("incorrect", ["wrong-dtype", "float64"]),
    "nan_output.py": ("incorrect", ["NaN"]),
    "cuda_kernel.py": ("compile_error", ["needs a CUDA device"]),
}


def _evaluate(name: str, **kw) -> wb.Result:
    """A fault of the corpus on the CPU; plain PyTorch files are declared baselines (the fault, not the kernel
    policy, is what they test)."""
    cand = wb.Candidate.from_file(FAULTS / name)
    if cand.language == "torch":
        cand = wb.Candidate.from_file(FAULTS / name, language="torch")
    return wb.evaluate(TASK, cand, device="cpu", time_it=False, **kw)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_fault_gets_its_status_and_a_message_naming_the_cause(name):
    status, words = CORPUS[name]
    result = _evaluate(name, timeout=5 if name == "infinite_loop.py" else None)
    assert result.status == status, result.message
    for word in words:
        assert word in result.message, f"{word!r} not in: {result.message}"
    # The calling process survived; the next evaluation in the same session works.
    after = _evaluate("honest_softmax.py")
    assert after.status == "ok", after.message


def test_out_of_bounds_pointer_in_a_triton_kernel_is_never_ok_and_never_hangs():
    # Under the CPU interpreter an unmasked load far out of bounds dereferences host memory: the worker segfaults,
    # and its fault handler's stack names the kernel line. On a GPU it is an illegal memory access (tests/gpu).
    result = _evaluate("oob_pointer.py", timeout=60)
    assert result.status in ("runtime_error", "crashed", "incorrect"), result.message
    if result.status == "crashed":
        assert "SIGSEGV" in result.message and "candidate line 11 in oob_kernel" in result.message
        assert "masks" in result.message
    assert _evaluate("honest_softmax.py").status == "ok"


def test_every_candidate_gets_a_fresh_runner_and_a_crash_leaves_the_judge_alive():
    a = _evaluate("honest_softmax.py")
    b = _evaluate("wrong_shape.py")
    assert a.metadata["worker_pid"] == b.metadata["worker_pid"]  # one judge, reused
    assert a.protocol["runner_pid"] != b.protocol["runner_pid"]  # one runner per candidate
    crashed = _evaluate("segfault.py")
    assert crashed.status == "crashed"
    c = _evaluate("honest_softmax.py")
    assert c.status == "ok" and c.metadata["worker_pid"] == a.metadata["worker_pid"]
    assert len({a.protocol["runner_pid"], b.protocol["runner_pid"], crashed.protocol["runner_pid"],
                c.protocol["runner_pid"]}) == 4


def test_secrets_are_scrubbed_from_the_worker_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok")
    from workbench.dispatch.pool import shutdown_workers

    shutdown_workers()  # the next worker starts with this environment
    src = (FAULTS / "honest_softmax.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        import os\n"
        "        assert 'OPENAI_API_KEY' not in os.environ and 'MY_SERVICE_TOKEN' not in os.environ, 'leak'\n", 1)
    result = wb.evaluate(TASK, wb.Candidate(source=src), device="cpu", time_it=False)
    assert result.status == "ok", result.message
    assert os.environ["OPENAI_API_KEY"] == "sk-should-not-leak"


def test_candidate_prints_cannot_forge_the_protocol():
    src = (FAULTS / "honest_softmax.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        print('{\"status\": \"ok\", \"flags\": []}', flush=True)\n", 1)
    src = src.replace("e / tl.sum(e, 0)", "e / tl.sum(e, 0) * 2")
    result = wb.evaluate(TASK, wb.Candidate(source=src), device="cpu", time_it=False)
    assert result.status == "incorrect" and "mismatch" in result.flags
