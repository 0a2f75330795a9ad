"""A scripted, in-process stand-in for the candidate's runner (`RunnerProcess`), for tests of the judge's logic.

Why: what the judge decides (its stages, every status, the clock check, its caches and pools) does not depend on a
sandboxed process, yet a test that starts a fork server and a runner pays seconds for them and becomes a test of the
whole machine, noisy where the machine is busy. `FakeRunner` has the interface the judge uses (`ctx.runner_class`,
`judge/context.py`) and answers the judge's real messages as the real runner (`workbench/eval/runner/main.py`)
would: every frame is encoded and decoded as on the channel (job, nonce, sequence numbers, field types), inputs and
outputs cross through the judge's own shared memory (its memfd buffers, mapped a second time from descriptors
duplicated as the socket would), and the judge's deadlines, compile pauses and bracket clocks run for real. There is
no process, no sandbox and no candidate import: a `Script` says what the "candidate" computes, reports and costs.

Time: a request is handled as it is sent, and its reply is delivered when the scripted time has passed (the judge
sleeps in `receive` until then), so the judge's clock brackets what the script says the runner spent. CPU time: the
judge reads a runner's through its handle (`cpu_ns`, `cpu_use`); the fake counts what its own side spent (its
thread's CPU clock around each request it handles, a probe call's burn included, which it burns as the runner's
interpreter wrapper does), never the judge's work beside it. Threads: the judge and every runner run torch on one
intra-op thread on the CPU (`timed_loop.cpu_timing_threads`); `one_thread()` does the same for this process while it
is in effect (a small op with the timing's pinning and two threads took 10 ms a call), and `judge_fake` evaluates
inside it.

`judge_fake(task, script)` runs one evaluation in this process on the fake and returns the Result the caller would
(`verdict.reply` -> `result_from_reply` -> `_annotate`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

# Imported before any `one_thread`: the judge's ceilings keep the machine's default thread count (their cache key).
import workbench.eval.judge.ceilings  # noqa: F401
from workbench.eval.judge.runners.process import CpuUse, RunnerDied, RunnerViolation
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire import timed_loop
from workbench.eval.wire.runner_messages import LaunchReport, OpRecord, OutputForm, TensorRef
from workbench.eval.wire.shared_memory import Mapping, dtype_from_name, dtype_name

#: The fake's pids: above any pid Linux gives (PID_MAX_LIMIT is 2**22), so /proc has nothing for them and a signal
#: sent to them reaches no process.
NO_PROCESS_PID = (1 << 22) + 7

#: The honest row-softmax Triton kernel (its source passes the static scan; the fake never imports it).
HONEST_SOURCE = (Path(__file__).resolve().parent / "faults" / "honest_softmax.py").read_text()

#: A declared PyTorch baseline's source: timed on the wall clock (not the interpreter), no kernel policy applied.
BASELINE_SOURCE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''

_COMPILE_ERRORS = ("CompilationError", "CompileTimeAssertionFailure", "PTXASError", "UnsupportedLanguageConstruct")


# ---- what the candidate does ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Raise:
    """The candidate raises at the `at`-th request of `stage` (1-based; None: every one): the runner's Fault.
    Stages: "load" (a load or compile error), "init" (a Build), "forward" (a Call), "timing" (a timed batch of the
    candidate's model), "profile"."""

    stage: str
    exc_type: str = "RuntimeError"
    message: str = "scripted failure"
    at: int | None = 1
    candidate_line: str = ""
    log: str = ""


@dataclass(frozen=True)
class Die:
    """The runner dies at the `at`-th request of `stage`: "crashed" (its channel closes: `detail` says how, `log` is
    its last output), or "timeout" (it answers nothing more, and the judge's deadline decides)."""

    stage: str
    kind: str = "crashed"
    at: int | None = 1
    detail: str = "runner process killed by SIGSEGV"
    log: str = ""


@dataclass(frozen=True)
class Violate:
    """The runner's reply to the `at`-th request of `stage` breaks the protocol: "replay" (a sequence number used
    before), "kind" (a message the judge did not ask for), "nonce" (another job's nonce), "garbage" (not a frame)."""

    stage: str
    how: str = "replay"
    at: int | None = 1


@dataclass(frozen=True)
class Pause:
    """Compile pauses before the reply to the `at`-th request of `stage`: `count` times Compiling(done=False), then
    Compiling(done=True) `seconds` later, then a wait for the judge's Proceed (`runner/compile_pause.py`).
    `forged_end`: one Compiling(done=True) that no start preceded."""

    stage: str
    seconds: float = 0.0
    count: int = 1
    at: int | None = 1
    forged_end: bool = False


Event = Raise | Die | Violate | Pause
PerCall = float | Callable[[int], float]


@dataclass(frozen=True)
class Script:
    """What the scripted candidate does.

    forward: a callable on the input tensors (the candidate's forward: the reference's math, a wrong one, one that
        raises, mutates an input or returns another shape, dtype or type); None: `model` instead.
    model: a class built like the runner builds the candidate's (the Build's init arguments under its seed, then
        the reference's weights when they fit); `judge_fake` makes it the task's own `Model` when neither is given.
        A reference runner (role "reference") with neither builds the reference source it is asked to load.
    source, language, baseline: the candidate as the judge sees it (scanned, never imported here).
    launch: each correctness call's LaunchReport, or a function of the call number (1-based); None: one launch of
        the source's own kernels per call for Triton, none otherwise.
    ms: milliseconds per timed call the runner spends and reports (a number, or a function of the timed call's
        index counted from 0 over every batch of the candidate's model); a batch a busy host held up longer reports
        its calls stretched to what it really took, as an honest runner's clock would. None: what each call's
        computation took, as the real loop measures it (a few microseconds here: the judge's clock around them sees
        the fake's harness too, and can read a forged clock). The default, 2 ms, is an honest call.
    spend_ms: milliseconds per timed call the fake really spends before its Samples arrive, when it is not what it
        reports (`ms`, then reported as it is): the judge's clock around the batch disagrees with the report. At
        most `max_batch_s` per batch.
    stall_ms: milliseconds each timed batch's reply waits after the timed window without using CPU (a busy host
        waking the judge late): the bracket grows, the report and the runner's CPU seconds do not.
    load_s: seconds the import takes (the Loaded reply comes then).
    call_s: seconds each correctness call takes beside its computation (its Output comes then).
    profiled: a Profile's kernel microseconds by name (GPU coverage).
    threads_left: thread names every call and every timed batch reports still running.
    cpu_threads: threads the runner has (what `cpu_use` tells the judge).
    off_main_share: the share of the runner's CPU seconds spent on threads other than its main one (0: a candidate
        that computes on its calling thread; more is parallel work, `thread-use`).
    ops: the record of what torch ran, when the judge asks for one (ATen op -> count).
    events: faults, deaths, protocol violations and compile pauses at given requests (`Raise`, `Die`, `Violate`,
        `Pause`).
    """

    forward: Callable[..., Any] | None = None
    model: type | None = None
    source: str = HONEST_SOURCE
    language: str = "triton"
    baseline: bool = False
    launch: LaunchReport | Callable[[int], LaunchReport] | None = None
    ms: PerCall | None = 2.0
    spend_ms: PerCall | None = None
    max_batch_s: float = 2.0
    stall_ms: float = 0.0
    load_s: float = 0.0
    call_s: float = 0.0
    profiled: dict[str, float] | None = None
    threads_left: tuple[str, ...] = ()
    cpu_threads: int = 1
    off_main_share: float = 0.0
    ops: dict[str, int] = field(default_factory=dict)
    events: tuple[Event, ...] = ()

    @classmethod
    def baseline_torch(cls, **fields: Any) -> Script:
        """A declared PyTorch baseline (wall-clock timing, no kernel policy) with these fields."""
        return cls(source=BASELINE_SOURCE, language="torch", baseline=True, **fields)


def _per_call(value: PerCall | None, index: int) -> float | None:
    if value is None:
        return None
    return float(value(index)) if callable(value) else float(value)


# ---- the fake runner ------------------------------------------------------------------------------------------

class _Death:
    """A death in the outbox: the judge's receive meets it as the runner's end."""

    def __init__(self, detail: str, log: str):
        self.detail, self.log = detail, log


class _Later:
    """A reply made when it leaves the runner (its sequence number given when it was queued)."""

    def __init__(self, make: Callable[[], protocol.Message]):
        self.make, self.seq = make, 0


_GATE = object()  # in the outbox: what follows waits for the judge's Proceed


class FakeRunner:
    """The judge's handle on a scripted runner (module doc): RunnerProcess's interface, no process.

    `FakeRunner.scripted(script)` is the class to put in `Context.runner_class`; `runners` on it lists every runner
    it started, and each runner's `received` lists the judge's messages it got, for tests to inspect."""

    script: Script = Script()
    #: What a runner with role "reference" (the reference timed in a runner of its own) does.
    reference_script: Script = Script()
    runners: list[FakeRunner] = []

    def __init__(self, server: Any, device: str, limits: Any = None, extra_binds: Any = None,
                 share_ipc: bool = False, writable_binds: Any = None, warm: tuple[str, ...] = ()):
        if device.startswith("cuda"):
            raise ValueError("the fake runner maps memfd buffers only: use it with device='cpu'")
        self.server, self.device = server, device
        self.job, self.nonce = protocol.new_nonce()[:12], protocol.new_nonce()
        self.seq_out = self.seq_in = 0  # the judge's side, as RunnerProcess counts them
        self._their_in = self._their_out = 0  # the runner's side
        self.workdir: str | None = tempfile.mkdtemp(prefix="kwb_fake_runner_")
        self.pid = self.inner_pid = NO_PROCESS_PID
        self.sandbox, self.sandbox_reason = "fake", ""
        self.ready: protocol.Ready | None = None
        self.closed = False
        self.frozen = False
        self.role = "runner"
        self.received: list[protocol.Message] = []
        self.log_lines: list[str] = []
        self.counts: Counter[str] = Counter()
        self.timed_calls = 0
        self.cpu_seconds = 0.0
        self._cpu_ns = 0
        self._mapping: Mapping | None = Mapping(device)
        self._models: dict[int, Any] = {}
        self._pools: dict[int, tuple[list[list[Any]], list[torch.Tensor]]] = {}
        self._class: Any = None
        self._outbox: deque[tuple[float, Any]] = deque()
        self._held: deque[tuple[float, Any]] = deque()
        self._busy_until = time.monotonic()
        self._hung = False
        self._ended: RunnerDied | None = None
        type(self).runners.append(self)
        from workbench.eval.runner.main import _device_name, _versions

        self._emit([(0.0, protocol.Ready(protocol=protocol.PROTOCOL, pid=self.pid, versions=_versions(),
                                         device_name=_device_name(device), sandbox=self.sandbox))])

    @classmethod
    def scripted(cls, script: Script, reference: Script | None = None) -> type[FakeRunner]:
        """A runner class whose runners follow `script` (and `reference` for a reference runner)."""
        return type("ScriptedFakeRunner", (cls,), {"script": script, "reference_script": reference or Script(),
                                                   "runners": []})

    @classmethod
    def start(cls, server: Any, device: str, limits: Any = None, extra_binds: Any = None, share_ipc: bool = False,
              writable_binds: Any = None, warm: tuple[str, ...] = ()) -> FakeRunner:
        runner = cls(server, device, limits, extra_binds, share_ipc, writable_binds, warm)
        runner.await_ready()
        return runner

    def await_ready(self, deadline: float | None = None) -> protocol.Ready:
        if self.ready is not None:
            return self.ready
        ready = self.receive({"ready"}, deadline if deadline is not None else time.monotonic() + 60.0)
        assert isinstance(ready, protocol.Ready)
        self.ready = ready
        return ready

    def __enter__(self) -> FakeRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def current(self) -> Script:
        return self.reference_script if self.role == "reference" else self.script

    # -- messages, the judge's side --
    def send(self, message: protocol.Message, fds: list[int] | tuple[int, ...] = ()) -> None:
        if self._ended is not None:
            raise self._ended
        if self.frozen:
            raise AssertionError(f"the judge sent {message.kind!r} to a frozen runner")
        self.seq_out += 1
        frame = json.loads(json.dumps(protocol.encode(message, self.job, self.nonce, self.seq_out)))
        started = time.thread_time_ns()  # the runner's side from here
        self._their_in += 1
        got = protocol.decode(frame, job=self.job, nonce=self.nonce, seq=self._their_in, allowed=protocol.JUDGE_KINDS)
        self.received.append(got)
        self._handle(got, [os.dup(fd) for fd in fds])
        self._cpu_ns += time.thread_time_ns() - started

    def receive(self, kinds: set[str], deadline: float) -> protocol.Message:
        """The next message, which must be one of `kinds` (or a Fault): waited for until it is due, and never past
        `deadline` (then the runner is killed and "timeout" raised, as RunnerProcess does)."""
        if self._ended is not None:
            raise self._ended
        due = self._outbox[0][0] if self._outbox else None
        if due is None or due > deadline:
            _sleep_until(deadline)
            self.kill()
            raise RunnerDied("timeout", "no answer before the deadline", self.log_tail())
        _sleep_until(due)
        _, item = self._outbox.popleft()
        if isinstance(item, _Later):
            item = json.loads(json.dumps(protocol.encode(item.make(), self.job, self.nonce, item.seq)))
        if isinstance(item, _Death):
            self.log_lines += item.log.splitlines()
            self._ended = RunnerDied("crashed", item.detail, self.log_tail())
            raise self._ended
        self.seq_in += 1
        try:
            message = protocol.decode(item, job=self.job, nonce=self.nonce, seq=self.seq_in,
                                      allowed=frozenset(kinds | {"fault"}))
        except protocol.ProtocolError as exc:
            self.kill()
            raise RunnerViolation(str(exc), self.log_tail()) from None
        return message

    def answers_within(self, seconds: float) -> bool:
        """Whether the next message is due within `seconds` (waiting for it that long at most, as a poll does)."""
        if self._ended is not None:
            return True
        now = time.monotonic()
        if self._outbox and self._outbox[0][0] <= now + seconds:
            _sleep_until(self._outbox[0][0])
            return True
        time.sleep(max(0.0, seconds))
        return False

    def request(self, message: protocol.Message, kinds: set[str], timeout: float,
                fds: list[int] | tuple[int, ...] = ()) -> protocol.Message:
        self.send(message, fds)
        return self.receive(kinds, time.monotonic() + timeout)

    # -- lifecycle --
    def build_location(self) -> tuple[str, str]:
        assert self.workdir is not None
        return os.path.dirname(self.workdir), os.path.join(os.path.basename(self.workdir), "torch_extensions")

    def log_tail(self, lines: int = 50) -> str:
        return "\n".join(self.log_lines[-lines:])

    def wait_status(self) -> int:
        return 0

    def members(self) -> list[int]:
        """No process: nothing to pin or to watch."""
        return []

    def cpu_ns(self) -> int | None:
        """CPU nanoseconds the fake's side has spent handling requests (module doc)."""
        return self._cpu_ns

    def cpu_use(self) -> CpuUse:
        """The script's threads, and the seconds its timed batches and calls took (what /proc would say of a runner
        that spends its time computing)."""
        others = self.cpu_seconds * self.current.off_main_share
        return CpuUse(threads=self.current.cpu_threads, seconds=self.cpu_seconds,
                      main_ns=int((self.cpu_seconds - others) * 1e9), others_ns=int(others * 1e9))

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def kill(self) -> None:
        if self._ended is None:
            self._ended = RunnerDied("crashed", "runner process killed by SIGKILL", self.log_tail())

    def close(self, wait: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.thaw()
        try:
            self.send(protocol.Shutdown())
        except Exception:  # noqa: BLE001 - a dead runner takes no shutdown
            pass
        self.kill()
        if wait:
            self.reap()

    def reap(self) -> None:
        self._mapping = None  # its views go with the last tensor that holds them
        self._models.clear()
        self._pools.clear()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- the runner's side --
    def _emit(self, timeline: list[tuple[float, Any]]) -> None:
        """Queue replies: each (seconds after the previous one, message or frame or _Death or _GATE). They follow
        whatever the runner still works on; after a gate they wait for Proceed."""
        start = max(time.monotonic(), self._busy_until)
        for delay, item in timeline:
            if self._held or item is _GATE:
                self._held.append((delay, item))
                continue
            start += delay
            self._outbox.append((start, self._frame(item)))
            self._busy_until = start

    def _open_gate(self) -> None:
        if not self._held or self._held[0][1] is not _GATE:
            self._emit([(0.0, _Death("the runner was told to proceed with no compile pause", ""))])
            return
        self._held.popleft()
        start = max(time.monotonic(), self._busy_until)
        while self._held and self._held[0][1] is not _GATE:
            delay, item = self._held.popleft()
            start += delay
            self._outbox.append((start, self._frame(item)))
            self._busy_until = start

    def _frame(self, item: Any) -> Any:
        if isinstance(item, _Later):
            self._their_out += 1
            item.seq = self._their_out
            return item
        if not isinstance(item, protocol.Message):
            return item  # a _Death, or a frame already made (a violation)
        self._their_out += 1
        return json.loads(json.dumps(protocol.encode(item, self.job, self.nonce, self._their_out)))

    def _handle(self, msg: protocol.Message, fds: list[int]) -> None:
        if isinstance(msg, protocol.Share):
            assert self._mapping is not None
            self._mapping.add(msg.buffers, fds)
            return
        if isinstance(msg, protocol.Proceed):
            self._open_gate()
            return
        if isinstance(msg, protocol.Shutdown):
            self._hung = True  # it exits: nothing more is answered
            return
        if self._hung:
            return
        if isinstance(msg, protocol.Ping):
            self._emit([(0.0, protocol.Pong(call=msg.call))])
            return
        if isinstance(msg, protocol.Pool):
            self._pools[msg.pool] = ([[self._arg(v) for v in s] for s in msg.input_sets],
                                     [self._tensor(s) for s in msg.slots])
            return
        stage = {protocol.Load: "load", protocol.Build: "init", protocol.Call: "forward",
                 protocol.Profile: "profile"}.get(type(msg))
        if isinstance(msg, protocol.Time):
            stage = None if msg.model in (protocol.NULL_MODEL, protocol.NULL_KERNEL) else "timing"
        if stage is not None:
            self.counts[stage] += 1
        events = [e for e in self.current.events if stage is not None and e.stage == stage and
                  (e.at is None or e.at == self.counts[stage])]
        before: list[tuple[float, Any]] = []
        for event in events:
            if isinstance(event, Die):
                self.log_lines += event.log.splitlines()
                if event.kind == "timeout":
                    self._hung = True
                    return
                self._emit([(0.0, _Death(event.detail, event.log))])
                self._hung = True
                return
            if isinstance(event, Raise):
                fault_stage = "compile" if event.exc_type in _COMPILE_ERRORS and stage != "load" else stage
                assert fault_stage is not None
                self._emit([(0.0, protocol.Fault(stage=fault_stage, exc_type=event.exc_type, message=event.message,
                                                 candidate_line=event.candidate_line, log=event.log,
                                                 call=getattr(msg, "call", -1)))])
                return
            if isinstance(event, Pause):
                before += [(0.0, protocol.Compiling(done=True))] if event.forged_end else \
                    [(0.0, protocol.Compiling(done=False)), (event.seconds, protocol.Compiling(done=True)),
                     (0.0, _GATE)] * event.count
        handler = {protocol.Load: self._load, protocol.Build: self._build, protocol.Call: self._call,
                   protocol.Time: self._time, protocol.Profile: self._profile}[type(msg)]
        timeline = before + handler(msg)
        for event in events:
            if isinstance(event, Violate):
                delay, reply = timeline[-1]
                reply = reply.make() if isinstance(reply, _Later) else reply
                timeline = [*timeline[:-1], (delay, self._violation(event.how, reply))]
        self._emit(timeline)

    def _violation(self, how: str, reply: protocol.Message) -> Any:
        """`reply` made into a frame that breaks the protocol (`Violate`)."""
        if how == "garbage":
            return {"not": "a protocol frame"}
        if how == "replay":  # the right reply, under the sequence number of the last one
            return json.loads(json.dumps(protocol.encode(reply, self.job, self.nonce, self._their_out)))
        self._their_out += 1
        if how == "nonce":
            return json.loads(json.dumps(protocol.encode(reply, self.job, protocol.new_nonce(), self._their_out)))
        if how == "kind":  # a message the judge never asked for
            return json.loads(json.dumps(protocol.encode(protocol.Pong(call=0), self.job, self.nonce,
                                                         self._their_out)))
        raise ValueError(f"unknown violation {how!r}")

    def _tensor(self, ref: TensorRef) -> torch.Tensor:
        assert self._mapping is not None
        return self._mapping.tensor(ref)

    def _arg(self, value: Any) -> Any:
        if isinstance(value, TensorRef):
            return self._tensor(value)
        if isinstance(value, tuple):
            return [self._arg(v) for v in value]
        return value

    def _load(self, msg: protocol.Load) -> list[tuple[float, Any]]:
        from workbench.eval.checks.runtime import own_kernel_names

        script = self.current
        self._class = script.model
        if script.forward is None and script.model is None and self.role == "reference":
            from workbench.tasks.task import import_source  # the task's reference (trusted): what its runner imports

            module = import_source(msg.source, f"kwb_fake_reference_{self.job}", self.workdir)
            self._class = getattr(module, msg.entry)
        kernels = tuple(sorted(own_kernel_names(msg.source))) if msg.language == "triton" else ()
        return [(script.load_s, protocol.Loaded(kernels=kernels, seconds=script.load_s))]

    def _build(self, msg: protocol.Build) -> list[tuple[float, Any]]:
        from workbench.eval.wire import model_init
        from workbench.seeding import seed_all

        script = self.current
        loaded = False
        if script.forward is not None:
            model: Any = script.forward
        elif self._class is not None:
            try:
                init = [self._arg(v) for v in msg.init]
                seed_all(msg.seed)
                model = self._class(*init)
                if isinstance(model, torch.nn.Module):
                    state = {k: self._arg(v) for k, v in msg.state.items()}
                    if model_init.same_layout(model.state_dict(), state):
                        model.load_state_dict({k: v.detach().clone() for k, v in state.items()})
                        loaded = True
                    model = model.to(self.device).eval()
            except Exception as exc:  # noqa: BLE001 - as the runner reports a constructor's exception
                return [(0.0, self._fault("init", exc, -1, self._class))]
        else:
            raise ValueError("the script has no forward and no model: say what the candidate computes")
        self._models[msg.model] = model
        return [(0.0, protocol.Built(model=msg.model, weights_loaded=loaded))]

    def _fault(self, stage: str, exc: BaseException, call: int, code: Any) -> protocol.Fault:
        """The runner's Fault for an exception of the scripted candidate; its "candidate line" is the innermost frame
        in the file that defines the script's forward or model (as the runner names the candidate module's)."""
        from workbench.eval.runner.main import candidate_line

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        kind = type(exc).__name__
        return protocol.Fault(stage="compile" if kind in _COMPILE_ERRORS else stage, exc_type=kind,
                              message=str(exc)[:2000], candidate_line=candidate_line(tb, _defined_in(code)),
                              log="\n".join(tb.strip().splitlines()[-25:]), call=call)

    def _launch(self, call: int) -> LaunchReport:
        script = self.current
        if script.launch is not None:
            return script.launch(call) if callable(script.launch) else script.launch
        if script.language != "triton":
            return LaunchReport(launches=0, kernels=(), outputs_launched=False, threads_left=script.threads_left)
        from workbench.eval.checks.runtime import own_kernel_names

        return LaunchReport(launches=1, kernels=tuple(sorted(own_kernel_names(script.source))), outputs_launched=True,
                            threads_left=script.threads_left)

    def _call(self, msg: protocol.Call) -> list[tuple[float, Any]]:
        from workbench.eval.runner.poison import Poison

        model = self._models[msg.model]
        inputs = [self._arg(v) for v in msg.inputs]
        slots = [self._tensor(s) for s in msg.slots]
        started = time.perf_counter()
        poison = Poison(self.device)
        try:
            if msg.poison:
                poison.prepare([x for x in inputs if isinstance(x, torch.Tensor)] + slots)
            with torch.no_grad(), poison.during_call() if msg.poison else _nothing():
                timed_loop.seed_rng(msg.seed)
                out = model(*inputs)
            forms, is_tuple = _forms_and_copy(out, slots)
        except BaseException as exc:  # noqa: BLE001 - every exception of forward is the candidate's
            return [(0.0, self._fault("forward", exc, msg.call, self.current.forward or self._class))]
        seconds = time.perf_counter() - started
        launch = self._launch(self.counts["forward"])
        ops = OpRecord(ops=dict(self.current.ops), exports={}, launches=launch.launches, complete=True) \
            if msg.record else None
        burn = _burn(msg.probe_ns * launch.launches / 1e9)  # the runner's probe: CPU per interpreted launch
        self.cpu_seconds += seconds + burn
        script = self.current
        return [(script.call_s, protocol.Output(call=msg.call, forms=forms, tuple_output=is_tuple, launch=launch,
                                                seconds=seconds + burn + script.call_s, ops=ops))]

    def _time(self, msg: protocol.Time) -> list[tuple[float, Any]]:
        null = msg.model in (protocol.NULL_MODEL, protocol.NULL_KERNEL)
        if null:
            out = torch.zeros(msg.null_shape, dtype=dtype_from_name(msg.null_dtype or "float32"))
            model: Any = lambda *xs: out  # noqa: E731 - the runner's null candidate
        else:
            model = self._models[msg.model]
        sets, slots = self._pools[msg.pool]
        commits = [slots[k] for k in msg.order] if slots else []

        def commit(k: int, out: Any) -> None:
            if k < len(commits):
                first = out[0] if isinstance(out, (tuple, list)) else out
                if type(first) is torch.Tensor and first.shape == commits[k].shape and \
                        first.dtype == commits[k].dtype:
                    commits[k].copy_(first.detach())

        started = time.perf_counter()
        try:
            stream, device = timed_loop.time_batch(lambda xs: model(*xs), sets, list(msg.order), device=self.device,
                                                   after_rep=commit, seeds=msg.seeds)
        except BaseException as exc:  # noqa: BLE001
            return [(0.0, self._fault("timing", exc, msg.call, self.current.forward or self._class))]
        took = time.perf_counter() - started
        spend, stretch = took, False
        if not null:
            script = self.current
            first, self.timed_calls = self.timed_calls, self.timed_calls + len(msg.order)
            calls = range(first, first + len(msg.order))
            if script.ms is not None:
                stream = device = [_per_call(script.ms, k) or 0.0 for k in calls]
                stretch = script.spend_ms is None
            spent = script.spend_ms if script.spend_ms is not None else script.ms
            if spent is not None:
                spend = min(script.max_batch_s, sum(_per_call(spent, k) or 0.0 for k in calls) / 1e3)
        self.cpu_seconds += max(spend, took)
        threads = () if null else self.current.threads_left
        stall = 0.0 if null else self.current.stall_ms / 1e3

        def samples() -> protocol.Samples:
            """The batch's samples as its reply leaves. An honest runner's clock also sees what its batch lost to a
            busy host (it was descheduled), so honest scripted times stretch to what the batch really took; a
            script whose spent time is not what it reports (`spend_ms`) reports its figures as they are."""
            s, d = tuple(stream), tuple(device)
            elapsed, scripted = time.perf_counter() - started - stall, sum(s) / 1e3
            if stretch and 0 < scripted < elapsed:
                s = d = tuple(v * elapsed / scripted for v in s)
            return protocol.Samples(call=msg.call, stream_ms=s, device_ms=d, threads_left=threads)

        return [(max(0.0, spend - took) + stall, _Later(samples))]

    def _profile(self, msg: protocol.Profile) -> list[tuple[float, Any]]:
        return [(0.0, protocol.Profiled(call=msg.call, kernels=dict(self.current.profiled or {}), tracer="fake"))]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


def _burn(seconds: float) -> float:
    """Spend `seconds` of this thread's CPU time (what `launches.interpreter_probe` burns in a real runner)."""
    if seconds <= 0:
        return 0.0
    until = time.thread_time_ns() + int(seconds * 1e9)
    while time.thread_time_ns() < until:
        pass
    return seconds


def _sleep_until(moment: float) -> None:
    wait = moment - time.monotonic()
    if wait > 0:
        time.sleep(wait)


def _defined_in(code: Any) -> str | None:
    """The file that defines a function, a class or a callable object's class (the fake's "candidate module")."""
    import inspect

    for thing in (code, type(code)):
        try:
            return inspect.getsourcefile(thing)
        except TypeError:
            continue
    return None


def _forms_and_copy(out: Any, slots: list[torch.Tensor]) -> tuple[tuple[OutputForm, ...], bool]:
    """What each output is, and plain dense tensors of the slot's shape and dtype copied into their slot (as
    `Runner._forms_and_copy`)."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    forms = []
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            forms.append(OutputForm(type_name=type(o).__name__, plain=False))
            continue
        if type(o) is not torch.Tensor:
            forms.append(OutputForm(type_name=f"{type(o).__module__}.{type(o).__name__}", plain=False))
            continue
        dense = o.layout == torch.strided and not o.is_nested and o.device.type != "meta"
        form = OutputForm(type_name="Tensor", plain=True, dtype=dtype_name(o.dtype), shape=tuple(o.shape),
                          device=str(o.device), dense=dense)
        if dense and i < len(slots) and slots[i].shape == o.shape and slots[i].dtype == o.dtype:
            slots[i].copy_(o.detach())
            form = dataclasses.replace(form, copied=True)
        forms.append(form)
    return tuple(forms), isinstance(out, (tuple, list))


class FakeForkServer:
    """Stands for the judge's fork server: there is nothing to fork."""

    sandbox = "fake"
    reason = ""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.closed = False

    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


# ---- one evaluation in this process ----------------------------------------------------------------------------

@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread in this process for the block, as in the judge's and its runners' (module doc)."""
    before = torch.get_num_threads()
    timed_loop.cpu_timing_threads()
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fake_context(script: Script | None = None, reference: Script | None = None, workdir: str | None = None) -> Any:
    """A judge Context whose runners are scripted (keep it across evaluations to keep the judge's caches)."""
    from workbench.eval.judge.context import Context

    return Context(fork_server=FakeForkServer(), workdir=workdir or tempfile.mkdtemp(prefix="kwb_fake_judge_"),
                   runner_class=FakeRunner.scripted(script or Script(), reference))


def candidate_of(script: Script) -> Any:
    from workbench.candidate import Candidate

    return Candidate(source=script.source, language=script.language, baseline=script.baseline or None)


def fake_job(task: Any, script: Script, device: str = "cpu", reps: int | None = None, **options: Any) -> Any:
    """The Job `evaluate()` would send for `script`'s candidate (`reps`: a fixed count of timed calls)."""
    from workbench.eval.evaluate import make_job, resolve_options

    job = make_job(task, candidate_of(script), resolve_options(None, device, options))
    return dataclasses.replace(job, reps=reps) if reps is not None else job


def judge_fake(task: Any, script: Script, device: str = "cpu", *, context: Any = None,
               reference: Script | None = None, reps: int | None = None, **options: Any) -> Any:
    """Evaluate `script`'s candidate on `task` as the judge does, in this process, on scripted runners, and make the
    Result as the caller does. `context`: a Context to reuse (its caches and kept pool; its runner class is set to
    this script's); `reference`: what the reference's runner does (where the reference's time decides a verdict);
    `options`: EvalOptions fields (time_it, timeout, compile_timeout, rounds, seed, size)."""
    from workbench.eval.evaluate import _annotate
    from workbench.eval.judge import verdict
    from workbench.eval.judge.evaluation import Evaluation
    from workbench.eval.results import result_from_reply

    job = fake_job(task, script, device, reps, **options)
    ctx = context if context is not None else fake_context()
    if script.forward is None and script.model is None:
        script = dataclasses.replace(script, model=ctx.reference(task).module.Model)
    ctx.runner_class = FakeRunner.scripted(script, reference)
    with one_thread():
        fields = Evaluation(job, ctx).run()
    reply = verdict.reply({**fields, "judge_pid": os.getpid()})
    result = result_from_reply(task, candidate_of(script), job, reply)
    _annotate(result, task, reply)
    ctx.tidy()
    return result


def write_ceilings(folder: str | os.PathLike[str], copy_bandwidth: float, matmul_flops: float,
                   cache_levels: list[list[int]] | None = None) -> Path:
    """Measured-looking CPU roofline ceilings in `folder`/ceilings, where the judge reads them with KWB_CACHE_DIR set
    to `folder` (`roofline.ceilings.cache_path`): deterministic roofs instead of a measurement. `cache_levels`:
    [[level, bytes], ...] (None: this machine's)."""
    from roofline.ceilings import Ceilings, cache_path
    from workbench.eval.judge.ceilings import _default_threads

    previous = os.environ.get("KWB_CACHE_DIR")
    os.environ["KWB_CACHE_DIR"] = str(folder)
    try:
        with _default_threads():  # the judge keys its cache read at the machine's default thread count
            path = cache_path("cpu")
    finally:
        if previous is None:
            del os.environ["KWB_CACHE_DIR"]
        else:
            os.environ["KWB_CACHE_DIR"] = previous
    details: dict[str, Any] = {"method": "written by a test"}
    if cache_levels is not None:
        details.update(cache_levels=cache_levels, max_clock_hz=1.0)
    ceilings = Ceilings(device_name="cpu (test ceilings)", copy_bandwidth=copy_bandwidth,
                        matmul_flops={"fp32": matmul_flops, "fp64": matmul_flops / 2}, key=path.stem,
                        measured_at="test", details=details, device="cpu")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ceilings.to_dict()))
    return path
