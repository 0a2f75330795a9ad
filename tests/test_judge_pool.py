"""The caller's judge pool and each candidate's runner: environments, memory cap, deadlines, lifecycle."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb
from workbench.dispatch import judges as judge_process
from workbench.dispatch import pool as judge_pool
from workbench.eval.judge.runners.process import ForkServer, RunnerProcess
from workbench.eval.wire import process_env

TASK = softmax_task()
TORCH_SOFTMAX = "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
                "{body}        return torch.softmax(x, -1)\n"


def _torch(body: str = "", head: str = "") -> wb.Candidate:
    return wb.Candidate(source=head + TORCH_SOFTMAX.format(body=body), language="torch")


def _eval(cand: wb.Candidate, **kw) -> wb.Result:
    return wb.evaluate(TASK, cand, device="cpu", time_it=False, **kw)


@pytest.fixture
def fresh_pool():
    """Judges started inside the test see the test's environment; the pool is reset again afterwards."""
    judge_pool.shutdown_judges()
    yield
    judge_pool.shutdown_judges()


def test_the_judge_gets_no_secrets_and_a_runner_gets_only_its_allow_list(monkeypatch):
    secret = ["OPENAI_API_KEY", "MY_SERVICE_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN"]
    for name in [*secret, "KAGGLE_KEY", "DATABASE_URL", "MY_SETTING"]:
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    judge = judge_process.scrubbed_env("cpu")
    assert [n for n in secret if n in judge] == [] and judge["MY_SETTING"] == "x"
    runner = process_env.runner_env("cpu")
    # An allow-list: what a deny-list misses never arrives either.
    assert not {"KAGGLE_KEY", "DATABASE_URL", "MY_SETTING", *secret} & set(runner)
    assert set(runner) <= set(process_env.ENV_ALLOW) | {"HOME", "TMPDIR", "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER",
                                                    "PYTHONDONTWRITEBYTECODE", "TRITON_CACHE_DIR",
                                                    "TORCH_EXTENSIONS_DIR", "XDG_CACHE_HOME", "OMP_WAIT_POLICY"}
    assert runner["TRITON_INTERPRET"] == "1" and "TRITON_INTERPRET" not in process_env.runner_env("cuda")


def test_a_runner_starts_fast_from_the_fork_server_and_every_one_is_new():
    server = ForkServer("cpu")
    try:
        pids, started = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            with RunnerProcess.start(server, "cpu") as runner:
                started.append(time.perf_counter() - t0)
                pids.append(runner.inner_pid)
                # The runner names its tier: its namespaces (and filter) where the server found them.
                assert runner.ready.sandbox.startswith("namespaces") == (server.sandbox == "namespaces")
        assert len(set(pids)) == 3
        assert min(started) < 5.0  # forked with torch already imported: no re-import per candidate
        time.sleep(0.2)
        assert all(not Path(f"/proc/{pid}").exists() for pid in pids)  # closed means gone
    finally:
        server.close()


def test_memory_cap_turns_a_large_allocation_into_out_of_memory(monkeypatch):
    # 2.5 GiB, more than the whole 2.5 GiB address-space cap whatever the runner already holds: refused under the
    # cap, harmless without it. Only a model's first call allocates, so the uncapped run fills it (junk fill) once.
    cand = _torch(body="        if not hasattr(self, 'big'):\n"
                       "            self.big = torch.empty(5 * 2**27, dtype=torch.float32).numel()\n")
    monkeypatch.setenv("KWB_WORKER_MEMORY_GB", "2.5")
    capped = _eval(cand)
    assert capped.status == "runtime_error", capped.message
    assert "out of memory" in capped.message and "candidate line 5 in forward" in capped.message
    monkeypatch.setenv("KWB_WORKER_MEMORY_GB", "0")  # no cap: the same candidate is fine
    assert _eval(cand).status == "ok"


def test_a_judge_that_cannot_start_is_an_error_not_a_candidate_result(monkeypatch, fresh_pool):
    monkeypatch.setattr(judge_process, "STARTUP_TIMEOUT", 0.01)
    with pytest.raises(wb.WorkerError, match="could not start"):
        _eval(_torch())


def test_the_judge_and_its_runners_run_this_package_whatever_the_working_directory(tmp_path, monkeypatch, fresh_pool):
    """A folder named `workbench` in the working directory (a user's own project, another checkout of the engine) is
    not what the judge or its fork server import: `python -m` would have put it first on their path."""
    impostor = tmp_path / "workbench"
    for folder in (impostor, impostor / "eval", impostor / "eval" / "judge", impostor / "eval" / "runner"):
        folder.mkdir()
        (folder / "__init__.py").write_text("raise ImportError('the package in the working directory was imported')\n")
    monkeypatch.chdir(tmp_path)
    res = _eval(_torch())
    assert res.status == "ok", res.message


def test_a_hung_candidate_times_out_and_everything_it_started_dies(tmp_path):
    marker = f"sleep 3{os.getpid() % 1000}7"
    cand = _torch(body=f"        import os\n        os.system('{marker} &')\n"
                       "        while True:\n            pass\n")
    started = time.monotonic()
    res = _eval(cand, timeout=4)
    assert res.status == "timeout" and "4 s" in res.message
    assert time.monotonic() - started < 60
    time.sleep(0.3)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).startswith(marker.split()[0]) and
             marker.split()[1] in _cmdline(p)]
    assert alive == []
    assert _eval(_torch()).status == "ok"  # the judge survived and the next candidate gets a fresh runner


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_judge_is_reused_and_recycled_after_many_jobs(monkeypatch):
    a = _eval(_torch())
    [pooled] = judge_pool.judges("cpu")
    monkeypatch.setattr(judge_pool, "MAX_JOBS_PER_JUDGE", pooled.jobs + 1)
    b = _eval(_torch())
    assert a.status == b.status == "ok" and a.metadata["judge_pid"] == b.metadata["judge_pid"] == pooled.pid
    assert judge_pool.judges("cpu") != [pooled] and not pooled.alive()


def test_when_the_caller_dies_its_judge_fork_server_and_runner_die_too(tmp_path):
    # A caller killed mid-evaluation (a timeout, a crashed notebook) must not leave a judge holding memory.
    import signal
    import subprocess
    import sys

    marker = tmp_path / "started"
    script = (f"import pathlib, workbench as wb\nfrom engine_tasks import softmax_task\n"
              f"src = open({str(Path(__file__).parent / 'faults' / 'infinite_loop.py')!r}).read()\n"
              f"pathlib.Path({str(marker)!r}).write_text('x')\n"
              "wb.evaluate(softmax_task(), wb.Candidate(source=src, language='torch'), device='cpu', timeout=300)\n")
    caller = subprocess.Popen([sys.executable, "-c", script], cwd=str(Path(__file__).parent))
    deadline = time.monotonic() + 120
    judges: list[int] = []
    while time.monotonic() < deadline and not (judges and marker.exists()):
        time.sleep(0.5)
        judges = [int(p) for p in os.listdir("/proc") if p.isdigit() and
                  "workbench.eval.judge.main" in _cmdline(p) and _parent(p) == caller.pid]
    assert judges, "the caller never started a judge"
    family = _descendants(judges[0])
    while len(family) < 2 and time.monotonic() < deadline:  # the fork server, then the candidate's runner spinning
        time.sleep(0.25)
        family = _descendants(judges[0])
    assert family, "no fork server below the judge"
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 20  # the judge notices within a second; its children follow it
    alive = [judges[0], *family]
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and _state(p) not in ("Z", "")]
    assert alive == []


def _parent(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(p) == parent]
        found += kids
        frontier += kids
    return found


OUT_OF_MEMORY_REFERENCE = '''
import torch
import torch.nn as nn

n = 16


class Model(nn.Module):
    def forward(self, x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


def test_a_judge_out_of_memory_is_retried_once_without_its_caches_then_reported():
    # The judge's own out-of-memory (here: the reference's) drops what it keeps of earlier tasks and evaluates once
    # more; the retry builds this task's models again, so "something was dropped" holds every time, and a retry
    # that retried would never end.
    task = wb.Task.from_source(OUT_OF_MEMORY_REFERENCE, name="oom_reference")
    wb.evaluate(TASK, _torch(), device="cpu", time_it=False)  # something of an earlier task in the judge's caches
    started = time.monotonic()
    res = wb.evaluate(task, _torch(), device="cpu", time_it=False)
    assert res.status == "runtime_error" and "out of memory" in res.message, res.message
    assert res.protocol.get("out_of_memory_retry"), res.protocol
    assert time.monotonic() - started < 60


def test_with_two_judges_candidates_overlap_and_each_timing_has_the_device_to_itself(monkeypatch, fresh_pool):
    monkeypatch.setenv("KWB_JUDGES", "2")
    cands = [_torch(head=f"# variant {k}\n") for k in range(4)]
    started = time.monotonic()
    results = wb.evaluate_many(TASK, cands, device="cpu", progress=False)
    wall = time.monotonic() - started
    assert [r.status for r in results] == ["ok"] * 4, [r.message for r in results]
    assert [r.candidate_id for r in results] == [c.id for c in cands]  # in the candidates' order
    assert len({r.metadata["judge_pid"] for r in results}) == 2
    # In flight together: the evaluations' own seconds add up to more than the wall clock...
    assert sum(r.metadata["eval_seconds"] for r in results) > 1.2 * wall
    # ...and where one judge's stage needed the device while the other timed, it waited (and says so).
    assert all(r.stage_seconds.get("time", 0) > 0 for r in results)
    assert any(r.stage_seconds.get("wait", 0) > 0 for r in results), [r.stage_seconds for r in results]
    # Within the check, where its seconds went: reference rounds, the candidate's calls, the comparisons.
    for r in results:
        phases = r.protocol["check_phases"]
        assert {"reference", "calls", "compare"} <= set(phases), phases
        assert phases["calls"] > 0 and sum(phases.values()) <= r.stage_seconds["check"] + 0.01, (phases,
                                                                                                r.stage_seconds)


def test_kwb_judges_that_is_not_a_number_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("KWB_JUDGES", "two")
    with pytest.raises(wb.WorkbenchError, match="KWB_JUDGES must be a whole number"):
        wb.evaluate_many(TASK, [_torch(), _torch(head="# b\n")], device="cpu", progress=False)


def test_a_judge_out_of_memory_with_nothing_of_other_tasks_kept_is_not_tried_again(fresh_pool):
    # A fresh judge keeps nothing of other tasks: dropping its caches frees nothing a second try could use.
    task = wb.Task.from_source(OUT_OF_MEMORY_REFERENCE, name="oom_reference")
    res = wb.evaluate(task, _torch(), device="cpu", time_it=False)
    assert res.status == "runtime_error" and "out of memory" in res.message, res.message
    assert "out_of_memory_retry" not in res.protocol


def test_a_gpu_gets_a_judge_per_four_cores_between_two_and_four(monkeypatch):
    """Only the timing holds the GPU exclusively, so judges beyond two keep it busier while they have cores for
    their runners; the CPU keeps one judge (the interpreter and the timing share its cores); KWB_JUDGES decides."""
    from workbench.dispatch import pool

    assert [pool.gpu_judges(c) for c in (None, 1, 2, 8, 12, 16, 64)] == [2, 2, 2, 2, 3, 4, 4]
    monkeypatch.delenv("KWB_JUDGES", raising=False)
    monkeypatch.setattr(pool, "_usable_cores", lambda: 16)
    assert pool.judge_slots("cuda") == 4 and pool.judge_slots("cuda:1") == 4 and pool.judge_slots("cpu") == 1
    monkeypatch.setattr(pool, "_usable_cores", lambda: 6)
    assert pool.judge_slots("cuda") == 2
    monkeypatch.setenv("KWB_JUDGES", "3")
    assert pool.judge_slots("cuda") == 3 and pool.judge_slots("cpu") == 3
