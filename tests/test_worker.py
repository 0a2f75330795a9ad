"""The worker pool: scrubbed environment, protocol channel, memory cap, process-group kill, replacement rules."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.eval import worker

FAULTS = Path(__file__).parent / "faults"
TASK = softmax_task()
HONEST = (FAULTS / "honest_softmax.py").read_text()
TORCH_SOFTMAX = "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
                "{body}        return torch.softmax(x, -1)\n"


def _torch(body: str = "", head: str = "") -> wb.Candidate:
    return wb.Candidate(source=head + TORCH_SOFTMAX.format(body=body), language="torch")


def _eval(cand: wb.Candidate, **kw) -> wb.Result:
    return wb.evaluate(TASK, cand, device="cpu", time_it=False, **kw)


@pytest.fixture
def fresh_pool():
    """Workers started inside the test see the test's environment; the pool is reset again afterwards."""
    worker.shutdown_workers()
    yield
    worker.shutdown_workers()


def test_secrets_are_removed_and_the_interpreter_mode_follows_the_device(monkeypatch):
    secret = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_SERVICE_TOKEN", "DB_PASSWORD", "DB_PASSWORD_FILE",
              "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "HF_TOKEN", "CLIENT_SECRET_VALUE", "GITHUB_TOKEN",
              "OPENAI_BASE_URL"]
    kept = ["HOME", "PATH", "HF_HOME", "MY_SETTING", "TOKENIZERS_PARALLELISM"]
    for name in secret + kept:
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cpu, cuda = worker.scrubbed_env("cpu"), worker.scrubbed_env("cuda")
    assert [n for n in secret if n in cpu or n in cuda] == []
    assert all(cpu[n] == "x" and cuda[n] == "x" for n in kept if n not in ("HOME", "PATH"))
    assert cpu["TRITON_INTERPRET"] == "1" and "TRITON_INTERPRET" not in cuda
    assert cpu["PYTHONFAULTHANDLER"] == "1"
    root = str(Path(worker.__file__).resolve().parents[1])
    assert cpu["PYTHONPATH"].split(os.pathsep)[0] == root


def test_candidate_output_goes_to_the_log_not_the_protocol():
    marker = "hello-from-the-candidate"
    cand = _torch(body=f"        import os\n        os.write(1, b'{{\"status\": \"rejected\"}}\\n')\n"
                       f"        print('{marker}')\n")
    res = _eval(cand)
    assert res.status == "ok", res.message
    assert marker in worker._POOL["cpu"].log_tail()


def test_a_garbled_protocol_line_is_a_crash_and_the_pool_recovers():
    cand = _torch(body="        import os, sys\n"
                       "        os.write(sys.modules['__main__']._PROTOCOL.fileno(), b'not json\\n')\n")
    res = _eval(cand)
    assert res.status == "crashed" and "unreadable reply" in res.message
    assert _eval(_torch()).status == "ok"


def test_memory_cap_turns_a_large_allocation_into_out_of_memory(monkeypatch, fresh_pool):
    # 4 GiB, never touched: harmless without a cap, refused under a 2.5 GiB address-space cap.
    cand = _torch(body="        big = torch.empty(2**30, dtype=torch.float32)\n        del big\n")
    monkeypatch.setenv("KWB_WORKER_MEMORY_GB", "2.5")
    capped = _eval(cand)
    limits = Path(f"/proc/{capped.metadata['worker_pid']}/limits").read_text()
    assert capped.status == "runtime_error", capped.message
    assert "out of memory" in capped.message and "candidate line 4 in forward" in capped.message
    assert str(int(2.5 * 2**30)) in next(ln for ln in limits.splitlines() if ln.startswith("Max address space"))
    monkeypatch.setenv("KWB_WORKER_MEMORY_GB", "0")  # no cap: the same candidate is fine
    worker.shutdown_workers()
    assert _eval(cand).status == "ok"


def test_a_worker_that_cannot_start_is_an_error_not_a_candidate_result(monkeypatch, fresh_pool):
    monkeypatch.setenv("KWB_WORKER_MEMORY_GB", "0.05")  # too little to import torch
    with pytest.raises(wb.WorkerError, match="could not start"):
        _eval(_torch())


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    cand = _torch(body=f"        import os\n        os.system('sleep 300 & echo $! > {pidfile}')\n"
                       "        while True:\n            pass\n")
    started = time.monotonic()
    res = _eval(cand, timeout=4)
    assert res.status == "timeout" and "no result within 4 s" in res.message
    assert time.monotonic() - started < 30
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert _eval(_torch()).status == "ok"


def test_worker_is_replaced_after_it_patched_trusted_functions():
    first = _eval(_torch())
    patched = _eval(_torch(head="import time\ntime.perf_counter = lambda: 0.0\n"))
    assert patched.status == "rejected" and "timer-patch" in patched.flags
    assert patched.metadata["worker_pid"] == first.metadata["worker_pid"]
    after = _eval(_torch())
    assert after.status == "ok" and after.metadata["worker_pid"] != patched.metadata["worker_pid"]


def test_workers_are_recycled_after_many_jobs_and_their_files_removed(monkeypatch):
    a = _eval(_torch())
    pooled = worker._POOL["cpu"]
    assert list(Path(pooled.workdir).glob("kwb_candidate_*.py"))  # candidates are imported from real files
    monkeypatch.setattr(worker, "MAX_JOBS_PER_WORKER", pooled.jobs + 1)
    b = _eval(_torch())
    assert a.status == b.status == "ok" and a.metadata["worker_pid"] == b.metadata["worker_pid"]
    assert worker._POOL["cpu"] is not pooled and not pooled.alive() and not Path(pooled.workdir).exists()
