"""Evaluations on a real Dask cluster: a scheduler and two workers started as `dask scheduler` / `dask worker`
processes on this machine. One worker is killed mid-batch; every candidate still gets exactly one Result, stored
once, in a real SQLite store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_tasks import softmax_task

import workbench as wb

pytest.importorskip("distributed")

#: An honest Triton row softmax of the adversarial gallery; each candidate of a batch gets its own variant line.
HONEST = (Path(__file__).parent / "cheats" / "honest_config_dict.py").read_text()
TRITON_SOFTMAX = "# variant {i}\n" + HONEST.replace("{", "{{").replace("}", "}}")
DASK = str(Path(sys.executable).with_name("dask"))


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen([DASK, *args], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-threaded workers without nannies (a killed worker stays dead)."""
    if not Path(DASK).exists():
        pytest.skip("the dask command is not installed")
    address_file = tmp_path / "scheduler.json"
    procs = {"scheduler": _start(["scheduler", "--scheduler-file", str(address_file), "--port", "0",
                                  "--no-dashboard", "--host", "127.0.0.1"], tmp_path / "scheduler.log")}
    deadline = time.monotonic() + 60
    while not address_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert address_file.exists(), (tmp_path / "scheduler.log").read_text()
    for name in ("a", "b"):
        procs[name] = _start(["worker", "--scheduler-file", str(address_file), "--nthreads", "1", "--no-nanny",
                              "--name", f"worker-{name}", "--no-dashboard", "--host", "127.0.0.1"],
                             tmp_path / f"worker-{name}.log")
    address = json.loads(address_file.read_text())["address"]
    from distributed import Client

    with Client(address, timeout="30s") as client:
        client.wait_for_workers(2, timeout=90)
        names = {info["name"]: addr for addr, info in client.scheduler_info()["workers"].items()}
    yield address.replace("tcp://", "dask://"), procs, {"a": names["worker-a"], "b": names["worker-b"]}
    for proc in procs.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


class KillingStore(wb.Store):
    """A real store that, when the first Result arrives, kills the worker that is evaluating another candidate."""

    def __init__(self, path: Path, procs: dict[str, subprocess.Popen], addresses: dict[str, str]):
        super().__init__(path)
        self.procs, self.addresses, self.killed = procs, addresses, ""
        self.added: list[str] = []

    def add(self, result, run_id=None, **metadata):
        self.added.append(result.candidate_id)
        if not self.killed:
            # The other worker is busy with the next candidate (one thread each, more candidates than workers).
            victim = "b" if result.metadata.get("cluster_worker") == self.addresses["a"] else "a"
            os.killpg(self.procs[victim].pid, signal.SIGKILL)
            self.killed = victim
        return super().add(result, run_id, **metadata)


def test_a_worker_killed_mid_batch_loses_no_result_and_duplicates_none(cluster, tmp_path):
    address, procs, addresses = cluster
    store = KillingStore(tmp_path / "results.db", procs, addresses)
    cands = [wb.Candidate(source=TRITON_SOFTMAX.format(i=i), language="triton", name=f"v{i}") for i in range(4)]
    results = wb.evaluate_many(softmax_task(), cands, device="cpu", cluster=address, store=store, progress=False,
                               time_it=False)
    assert store.killed and procs[store.killed].poll() is not None  # a worker really died mid-batch
    assert [r.candidate_id for r in results] == [c.id for c in cands]
    assert [r.status for r in results] == ["ok"] * 4, [(r.status, r.message[:200]) for r in results]
    assert sorted(store.added) == sorted(c.id for c in cands)  # each stored once
    frame = store.frame()
    assert len(frame) == 4 and frame["candidate_id"].nunique() == 4
    survivor = addresses["b" if store.killed == "a" else "a"]
    after_kill = [r.metadata["cluster_worker"] for r in results if r.candidate_id not in store.added[:1]]
    assert after_kill.count(survivor) >= 2  # the survivor took over what the dead worker held


def test_an_unreachable_scheduler_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("workbench.cluster.CONNECT_TIMEOUT", "2s")  # nothing listens there: the wait is the timeout
    with pytest.raises(wb.WorkbenchError, match="could not reach the Dask scheduler"):
        wb.evaluate_many(softmax_task(), [wb.Candidate(source=TRITON_SOFTMAX.format(i=0), language="triton")],
                         device="cpu", cluster="dask://127.0.0.1:9", progress=False)
