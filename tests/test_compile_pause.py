"""A candidate's compile lets go of the judge's shared hold of the device (`judge/device_lock.py`,
`runner/compile_pause.py`), with a real device lock: another judge's timing runs during the compile, never during the
candidate's GPU work, and a runner cannot use the pause to break into a measurement.

What the runner does is shown on a real runner on the CPU: its wrapped compile steps (`JITFunction._do_compile`,
Dynamo's frame compile) announce a compile in a call and at import. On the CPU Triton interprets kernels and never compiles, so those
candidates call the step themselves, with a stand-in kernel whose "compile" takes COMPILE_S. What the judge decides
about the pauses a runner announces (and about pauses that break the protocol) is shown on a scripted runner
(`tests/fake_runner.py`), whose pauses are `Pause` events.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from fake_runner import FakeForkServer, FakeRunner, Pause, Script

import workbench as wb
from workbench.eval.judge import device_lock as compile_pause
from workbench.eval.judge.device_lock import EXCLUSIVE, SHARED, DeviceLock
from workbench.eval.judge.reference.rounds import build_reference
from workbench.eval.judge.runners.process import ForkServer, RunnerProcess, RunnerViolation
from workbench.eval.judge.runners.session import CandidateSession
from workbench.eval.judge.timing import stage as timing_stage
from workbench.tasks.task import LoadedReference

COMPILE_S = 1.5

_HEADER = f'''
import time
import torch
import triton.runtime.jit as jit
from workbench.eval.runner import compile_pause
from workbench.eval.wire.runner_messages import Compiling


class _SlowCaches(dict):
    def __getitem__(self, key):
        time.sleep({COMPILE_S})
        raise KeyError(key)


class _Kernel:
    device_caches = _SlowCaches()


def compile_once():
    """What a fresh Triton kernel does in its first call: the runner's compile step, here a slow stand-in."""
    try:
        jit.JITFunction._do_compile(_Kernel(), None, None, "cpu", None, None, None, False)
    except KeyError:
        pass
'''


def _candidate(forward: str) -> str:
    return _HEADER + f'''

class ModelNew(torch.nn.Module):
    def forward(self, x):
{forward}
        return torch.softmax(x, dim=-1)
'''


COMPILES = _candidate("        compile_once()")

#: `torch.compile` in the candidate: Dynamo's frame compile, whose backend (a stand-in for Inductor) takes COMPILE_S.
TORCH_COMPILES = f'''
import time
import torch


def _slow_backend(graph, example_inputs):
    time.sleep({COMPILE_S})
    return graph.forward


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = torch.compile(lambda x: torch.softmax(x, dim=-1), backend=_slow_backend)

    def forward(self, x):
        return self.softmax(x)
'''


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


#: Seconds of a scripted compile: well past the grace and the other judge's hold.
SCRIPTED_S = 0.6
#: Scripted: a compile in the call.
SCRIPTED_COMPILE = Script(forward=_softmax, events=(Pause("forward", seconds=SCRIPTED_S),))
#: The same seconds inside the call, with no compile: the judge keeps its hold.
WORKS = Script(forward=_softmax, call_s=SCRIPTED_S)
#: A compile that ends well inside the grace (a kernel found in the Triton cache).
QUICK = Script(forward=_softmax, events=(Pause("forward", seconds=0.01),))
#: An honest autotuner compiles one kernel per config; a hundred pauses in one call.
MANY = Script(forward=_softmax, events=(Pause("forward", count=100),))
#: A pause inside a timed batch (a candidate can force the runner's own state to send one).
IN_TIMING = Script(forward=_softmax, events=(Pause("timing"),))
#: An end of a pause that never started (a candidate can write it through the runner's own channel).
FORGED_END = Script(forward=_softmax, events=(Pause("forward", forged_end=True),))


@pytest.fixture(scope="module")
def softmax(tmp_path_factory):
    task = wb.get_task("softmax")
    size = task.sizes["cpu"]
    ref = LoadedReference(task, str(tmp_path_factory.mktemp("ref")))
    return task, size, ref, build_reference(ref, size, "cpu", 0)


@pytest.fixture(scope="module")
def server():
    server = ForkServer("cpu")
    yield server
    server.close()


def _session(server, softmax, candidate: str | Script, lock: DeviceLock | None):
    """A loaded candidate's session: `candidate` a source for a real runner from `server`, or a Script for a scripted
    one."""
    task, size, ref, model = softmax
    if isinstance(candidate, Script):
        runner, source = FakeRunner.scripted(candidate).start(FakeForkServer(), "cpu"), candidate.source
    else:
        runner, source = RunnerProcess.start(server, "cpu"), candidate
    session = CandidateSession(runner, "cpu", 60.0)
    session.release_device = lock.released if lock is not None else None
    session.load(source, "torch", "ModelNew", task.precision.to_spec(), 60.0)
    remote = session.model(model, ref.init_inputs(size, 0), 0, {**ref.defaults, **size})
    x = ref.make_inputs(size, 1, "cpu")
    return session, remote, x, model


class _OtherJudge(threading.Thread):
    """Another judge on the same device, asking for `mode` while this one works; when it got the lock."""

    def __init__(self, folder: str, mode: int):
        super().__init__(daemon=True)
        self.lock, self.mode, self.got_in = DeviceLock("cpu", folder), mode, None

    def run(self) -> None:
        with self.lock.hold(self.mode):
            self.got_in = time.monotonic()
            time.sleep(0.2)


def _call_beside(tmp_path, server, softmax, candidate: str | Script, mode: int = SHARED, other: int = EXCLUSIVE):
    """One call of `candidate`'s model (a source or a Script: `_session`) while this judge holds the device in `mode`
    and another judge asks for `other` just after the call starts: (when the call started, when it returned, when
    the other judge got in, the session's pause log)."""
    lock = DeviceLock("cpu", str(tmp_path))
    session, remote, x, model = _session(server, softmax, candidate, lock)
    try:
        with lock.hold(mode):
            other_judge = _OtherJudge(str(tmp_path), other)
            started = time.monotonic()
            other_judge.start()
            out, _ = remote.call(x, [torch.empty_like(model(*x), device="meta")])
            returned = time.monotonic()
        other_judge.join(30)
        torch.testing.assert_close(out, torch.softmax(x[0], dim=-1))
        return started, returned, other_judge.got_in, session.pauses
    finally:
        session.close()


def test_a_timing_runs_while_the_candidate_compiles(tmp_path, server, softmax):
    started, returned, other_in, pauses = _call_beside(tmp_path, server, softmax, COMPILES)
    assert other_in is not None and started < other_in < returned - 0.5  # inside the compile, not after the call
    assert pauses.count == pauses.released == 1
    assert pauses.compiling_s >= COMPILE_S * 0.9


def test_a_timing_runs_while_torch_compile_compiles(tmp_path, server, softmax):
    """Dynamo's tracing and the backend's code generation take seconds of CPU in the first call; another judge's
    timing runs meanwhile, as it does during a Triton compile."""
    started, returned, other_in, pauses = _call_beside(tmp_path, server, softmax, TORCH_COMPILES)
    assert other_in is not None and started < other_in < returned - 0.5
    assert pauses.count >= 1 and pauses.released >= 1
    assert pauses.compiling_s >= COMPILE_S * 0.9


def test_the_hold_stays_through_work_that_is_not_a_compile(tmp_path, softmax):
    started, returned, other_in, pauses = _call_beside(tmp_path, None, softmax, WORKS)
    assert other_in is not None and other_in >= returned
    assert pauses.count == 0


def test_an_exclusive_hold_is_never_given_up_for_a_compile(tmp_path, softmax):
    started, returned, other_in, pauses = _call_beside(tmp_path, None, softmax, SCRIPTED_COMPILE, mode=EXCLUSIVE,
                                                        other=SHARED)
    assert other_in is not None and other_in >= returned
    assert pauses.count == 1 and pauses.released == 0


def test_a_build_at_import_lets_go_of_the_device_too(tmp_path, server, softmax):
    """A CUDA candidate's load_inline builds with nvcc while the candidate is imported (the load request): the same
    pause, here from a compile at import."""
    task = softmax[0]
    lock = DeviceLock("cpu", str(tmp_path))
    with RunnerProcess.start(server, "cpu") as runner:
        session = CandidateSession(runner, "cpu", 60.0)
        session.release_device = lock.released
        with lock.hold(SHARED):
            other_judge = _OtherJudge(str(tmp_path), EXCLUSIVE)
            other_judge.start()
            session.load(COMPILES + "\ncompile_once()\n", "torch", "ModelNew", task.precision.to_spec(), 60.0)
            returned = time.monotonic()
        other_judge.join(30)
        pauses = session.pauses
        session.close()
    assert other_judge.got_in is not None and other_judge.got_in < returned - 0.5
    assert pauses.count == pauses.released == 1


def test_a_compile_shorter_than_the_grace_keeps_the_hold(tmp_path, softmax):
    """A kernel found in the Triton cache "compiles" in milliseconds: letting go for that and queueing behind another
    judge's timing to get the device back would cost more than the compile. The pause is counted, the hold kept."""
    started, returned, other_in, pauses = _call_beside(tmp_path, None, softmax, QUICK)
    assert other_in is not None and other_in >= returned
    assert pauses.count == 1 and pauses.released == 0


def test_pauses_of_one_request_let_go_of_the_device_a_bounded_number_of_times(tmp_path, softmax, monkeypatch):
    # every pause lets go (none counts as ended within the grace): the bound decides
    monkeypatch.setattr(FakeRunner, "answers_within", lambda self, seconds: False)
    lock = DeviceLock("cpu", str(tmp_path))
    session, remote, x, model = _session(None, softmax, MANY, lock)
    try:
        with lock.hold(SHARED):
            out, _ = remote.call(x, [torch.empty_like(model(*x), device="meta")])
        torch.testing.assert_close(out, torch.softmax(x[0], dim=-1))
        pauses = session.pauses
    finally:
        session.close()
    assert pauses.count == 100 and pauses.released == compile_pause.MAX_PAUSES


def test_a_pause_inside_a_timed_batch_is_a_protocol_violation(softmax):
    task, size, ref, model = softmax
    session, remote, x, _ = _session(None, softmax, IN_TIMING, None)
    try:
        plan, _ = timing_stage.prepare(session, ref, model, size, 0, "cpu", 60.0, interpreted=False)
        with pytest.raises(RunnerViolation, match="compiling"):
            session.time(remote.model_id, plan.pool.pool_id, [0], 60.0)
    finally:
        session.close()


def test_the_end_of_a_pause_that_never_started_is_a_protocol_violation(softmax):
    session, remote, x, model = _session(None, softmax, FORGED_END, None)
    try:
        with pytest.raises(RunnerViolation, match="never started"):
            remote.call(x, [torch.empty_like(model(*x), device="meta")])
    finally:
        session.close()


def test_dynamo_imported_after_the_runner_starts_is_wrapped_on_import():
    """A GPU runner has not imported Dynamo when it starts; the candidate's `torch.compile` imports it, and its frame
    compile is wrapped right then."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from workbench.eval.runner import compile_pause\n"
            "assert 'torch._dynamo.convert_frame' not in sys.modules\n"
            "compile_pause.install_dynamo()\n"
            "import torch._dynamo.convert_frame as cf\n"
            "print(getattr(cf._compile, '_kwb_paused', False))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "True"
