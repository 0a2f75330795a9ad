"""The spare runner (`judge/runners/spare.py`): the next candidate's runner started while this one is checked, asked
for on the CPU here (`KWB_SPARE_RUNNER=1`, a GPU default) so real judges and sandboxed runners run the path.

What must hold: every candidate still gets a runner no candidate ran in (nothing one candidate leaves in its runner
reaches the next), a spare serves only jobs its start fits, and the Triton cache entries lent to a spare and copied
back from it pass through the judge's no-link copy, so a runner can neither read host files through a link planted
in its source's cache nor plant anything in a cache but its own source's."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

import pytest
from engine_tasks import SOFTMAX, evaluate_after_an_import_failure

import workbench as wb
from workbench.eval.judge.runners import spare as spare_runner
from workbench.eval.judge.runners import start as runner_start
from workbench.eval.judge.runners.process import ForkServer
from workbench.tasks.kernelbench import reference_as_candidate

MARKER = "kwb-spare-marker"

#: Leaves a file in its runner's /tmp and Triton cache at import; computes the right answer.
LEAVES_FILES = f'''
import os
import torch
import torch.nn as nn

for base in ("/tmp", os.environ.get("TRITON_CACHE_DIR") or "/tmp"):
    with open(os.path.join(base, {MARKER!r}), "w") as f:
        f.write("left by the previous candidate")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''

#: Right only where no earlier candidate's file is visible: a runner shared with the previous candidate would fail.
FINDS_NOTHING = f'''
import os
import torch
import torch.nn as nn

SEEN = [p for p in ("/tmp", os.environ.get("TRITON_CACHE_DIR") or "/tmp") if os.path.exists(os.path.join(p, {MARKER!r}))]


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.softmax(x, dim=-1)
        return out + 1.0 if SEEN else out
'''


@pytest.fixture
def spares(one_judge, monkeypatch):
    monkeypatch.setenv("KWB_SPARE_RUNNER", "1")
    yield


def _candidate(source: str) -> wb.Candidate:
    return wb.Candidate(source=source, language="torch")


def test_the_next_candidate_runs_in_the_spare_a_runner_no_candidate_ran_in(spares):
    task = wb.Task.from_source(SOFTMAX, name="spare-softmax")
    first = wb.evaluate(task, _candidate(LEAVES_FILES), device="cpu", time_it=False)
    second = wb.evaluate(task, _candidate(FINDS_NOTHING), device="cpu", time_it=False)
    third = wb.evaluate(task, reference_as_candidate(task), device="cpu")
    for res in (first, second, third):
        assert res.status == "ok", res.message
    assert first.protocol["runner"] == "started"
    assert second.protocol["runner"] == "spare" and third.protocol["runner"] == "spare"
    assert len({r.protocol["runner_pid"] for r in (first, second, third)}) == 3  # a runner each
    # The reference against itself in a spare: timed like any runner, so no decided difference. (At 4 us a call on two
    # shared, loaded cores the point estimate has read 0.48 and 5.0, each with a CI that held 1.)
    assert third.speedup is not None and third.speedup_verdict in ("same", "inconclusive"), third


def test_a_candidate_that_fails_at_import_leaves_a_spare_that_serves_the_next(spares):
    res = evaluate_after_an_import_failure(wb.Task.from_source(SOFTMAX, name="spare-after-failure"))
    assert res.protocol["runner"] == "spare"


def test_without_the_switch_every_cpu_candidate_starts_its_runner():
    # The pooled judge: started without KWB_SPARE_RUNNER (only the tests above set it, for judges of their own).
    if os.environ.get("KWB_SPARE_RUNNER"):
        pytest.skip("KWB_SPARE_RUNNER is set in this environment: the CPU default cannot be seen")
    task = wb.Task.from_source(SOFTMAX, name="spare-off")
    for _ in range(2):
        res = wb.evaluate(task, reference_as_candidate(task), device="cpu", time_it=False)
        assert res.status == "ok", res.message
        assert res.protocol["runner"] == "started"


def test_an_idle_judge_closes_its_spare(spares, monkeypatch):
    from test_reference_runner import _descendants, _settled_descendants

    monkeypatch.setenv("KWB_POOL_IDLE_S", "2")
    task = wb.Task.from_source(SOFTMAX, name="spare-idle")
    res = wb.evaluate(task, reference_as_candidate(task), device="cpu", time_it=False)
    assert res.status == "ok", res.message
    pid = res.metadata["judge_pid"]
    with_spare = _settled_descendants(pid)  # the fork server and the spare runner
    deadline = time.monotonic() + 30
    while len(_descendants(pid)) >= len(with_spare) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert len(_descendants(pid)) < len(with_spare), "the idle judge still runs its spare runner"
    again = wb.evaluate(task, reference_as_candidate(task), device="cpu", time_it=False)
    assert again.status == "ok" and again.protocol["runner"] == "started"


@pytest.fixture
def fork_server(tmp_path):
    server = ForkServer("cpu")
    from workbench.eval.judge.runners.process import RunnerProcess

    yield types.SimpleNamespace(fork_server=server, workdir=str(tmp_path), spare=None, runner_class=RunnerProcess,
                                device_lock=None)
    server.close()


def test_a_spare_serves_only_a_job_its_start_fits(fork_server):
    ctx = fork_server
    key = spare_runner.SpareKey("cpu", 8 << 30, False, ())
    ctx.spare = spare_runner.spawn(ctx, key)
    assert ctx.spare is not None
    unfit = ctx.spare
    # Another address-space limit: the spare is closed, not lent.
    assert runner_start._take_spare(ctx, spare_runner.SpareKey("cpu", 4 << 30, False, ())) is None
    assert unfit.runner.closed and ctx.spare is None
    ctx.spare = spare_runner.spawn(ctx, key)
    # Libraries it did not load: not lent either (the candidate would load them in its own stages).
    assert runner_start._take_spare(ctx, spare_runner.SpareKey("cpu", 8 << 30, False, ("cudnn",))) is None
    ctx.spare = spare_runner.spawn(ctx, spare_runner.SpareKey("cpu", 8 << 30, False, ("cuda", "cudnn")))
    taken = runner_start._take_spare(ctx, spare_runner.SpareKey("cpu", 8 << 30, False, ("cuda",)))
    assert taken is not None and taken.settled and ctx.spare is None
    assert taken.runner.ready is not None and not taken.runner.closed
    spare_runner.discard(taken)
    assert taken.runner.closed


# -- the Triton cache's copies ----------------------------------------------------------------------------------------
CANARY = "kwb-host-secret-7e11"


def _entry(root: Path, name: str, files: dict[str, str]) -> Path:
    d = root / name
    d.mkdir()
    for fname, text in files.items():
        (d / fname).write_text(text)
    return d


@pytest.fixture
def host_secret(tmp_path):
    secret = tmp_path / "host"
    secret.mkdir()
    (secret / "passwd").write_text(CANARY)
    return secret


def _all_text(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            out.append(p.read_text(errors="replace"))
    return "\n".join(out)


def test_lending_a_sources_cache_copies_plain_entries_and_nothing_a_link_reaches(tmp_path, host_secret):
    source = tmp_path / "source"
    source.mkdir()
    _entry(source, "a" * 32, {"kernel.cubin": "CUBIN", "__grp__kernel.json": "{}"})
    os.symlink(host_secret, source / "planted-dir")                      # an entry that is a link to the host
    inner = _entry(source, "b" * 32, {"kernel.json": "{}"})
    os.symlink(host_secret / "passwd", inner / "kernel.cubin")            # a link inside an entry
    hard = _entry(source, "c" * 32, {})
    os.link(host_secret / "passwd", hard / "kernel.cubin")                # a hard link to a host file
    _entry(source, "tmp.pid_12_34", {"half-written": "x"})                # a killed compile's leftovers
    spare = spare_runner.Spare(spare_runner.SpareKey("cuda", None, False, ()), runner=None,  # type: ignore[arg-type]
                               triton_dir=tmp_path / "spare")
    spare.triton_dir.mkdir()
    assert spare_runner.fill(spare, source) == 1
    assert sorted(os.listdir(spare.triton_dir)) == ["a" * 32]
    assert (spare.triton_dir / ("a" * 32) / "kernel.cubin").read_text() == "CUBIN"
    assert CANARY not in _all_text(spare.triton_dir)


def test_giving_back_copies_only_new_plain_entries_into_the_sources_cache(tmp_path, host_secret):
    source = tmp_path / "source"
    source.mkdir()
    _entry(source, "a" * 32, {"kernel.cubin": "CUBIN"})
    spare_dir = tmp_path / "spare"
    spare_dir.mkdir()
    kept = _entry(spare_dir, "a" * 32, {"kernel.cubin": "REPLACED"})     # an existing entry rewritten
    (kept / "extra.cubin").write_text("PLANTED")
    _entry(spare_dir, "d" * 32, {"kernel.cubin": "NEW"})                  # a kernel it compiled
    os.symlink(host_secret, spare_dir / ("e" * 32))                       # a link for the next runner to read
    planted = _entry(spare_dir, "f" * 32, {})
    os.symlink(host_secret / "passwd", planted / "kernel.cubin")
    spare = spare_runner.Spare(spare_runner.SpareKey("cuda", None, False, ()), runner=None,  # type: ignore[arg-type]
                               triton_dir=spare_dir)
    assert spare_runner.give_back(spare, source) == 1
    assert sorted(os.listdir(source)) == sorted(["a" * 32, "d" * 32])
    assert (source / ("a" * 32) / "kernel.cubin").read_text() == "CUBIN"  # entries it found stay as they were
    assert not (source / ("a" * 32) / "extra.cubin").exists()
    assert (source / ("d" * 32) / "kernel.cubin").read_text() == "NEW"
    assert CANARY not in _all_text(source)
    assert not spare_dir.exists()  # the spare's own directory is removed
