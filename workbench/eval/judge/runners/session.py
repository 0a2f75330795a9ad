"""The judge's side of one candidate: its runner, the shared buffers it may touch, and remote models the correctness
protocol calls as if local. Inputs and output slots are shared memory the judge owns; the runner's reports are kept
in `reports`; its exception arrives as a `Fault` (a type name and a text) raised as `CandidateFailure`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from workbench.eval.judge import device_lock
from workbench.eval.judge.correctness.check import CandidateFailure
from workbench.eval.judge.evidence.probe import ProbePlanner
from workbench.eval.judge.runners.process import RunnerProcess
from workbench.eval.wire import model_init
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire.runner_messages import OutputForm, TensorRef
from workbench.eval.wire.shared_memory import Arena, dtype_from_name
from workbench.eval.wire.tensors import LARGE_OUTPUT_BYTES, as_list, bytes_per_element
from workbench.eval.wire.transport import MAX_FDS

if TYPE_CHECKING:
    from workbench.eval.judge.timing.inputs import InputPool


class RemoteError(Exception):
    """A candidate's exception as the runner described it."""

    def __init__(self, fault: protocol.Fault):
        self.fault = fault
        super().__init__(fault.message)


class _ReportedSubclass(torch.Tensor):
    """Stands for a tensor subclass the candidate returned (its data never leaves the runner)."""


def _standin(form: OutputForm, device: str) -> Any:
    """A judge-side object with the form the runner reported, so the comparison names the right problem."""
    if form.type_name != "Tensor" and not form.plain:
        if "." in form.type_name:  # a torch.Tensor subclass, reported as module.name
            module, _, name = form.type_name.rpartition(".")
            return torch.empty(0).as_subclass(type(name, (_ReportedSubclass,), {"__module__": module}))
        name = form.type_name.rsplit(".", 1)[-1] or "object"
        return type(name, (), {"__repr__": lambda self: f"<{form.type_name} object>"})()
    dtype = dtype_from_name(form.dtype) if form.dtype else torch.float32
    if not form.dense:
        return torch.empty(form.shape, dtype=dtype, device="meta")
    target = device if torch.device(form.device).type == torch.device(device).type else "cpu"
    return torch.empty(1, dtype=dtype, device=target).expand(form.shape) if form.shape else \
        torch.empty((), dtype=dtype, device=target)


@dataclass
class CallRecord:
    """One candidate call as the runner reported it and as the judge measured it (CPU ns from /proc, the wall bracket,
    an output equal to an input), with the model, the shapes of the inputs the judge sent and a probe call's CPU budget
    per launch (0 in other calls)."""

    launch: protocol.LaunchReport
    forms: tuple[OutputForm, ...]
    seconds: float
    ops: protocol.OpRecord | None = None
    cpu_ns: int | None = None
    wall_s: float = 0.0
    passthrough: bool = False
    model: int = 0
    probe_ns: int = 0
    shapes: tuple[tuple[int, ...], ...] = ()


@dataclass
class CandidateSession:
    """A loaded candidate in its runner; `arena` holds everything shared with it."""

    runner: RunnerProcess
    device: str
    timeout: float
    transport: str = "auto"
    arena: Arena = field(init=False)
    reports: list[CallRecord] = field(default_factory=list)
    record_ops: bool = False  # ask for a record of what torch ran in every correctness call (`checks/what_ran.py`)
    profiles: list[dict[str, float]] = field(default_factory=list)  # kernel times of each profiled forward, in order
    load_seconds: float = 0.0
    warmup_seconds: float = 0.0  # the runner's GPU library warm-up before its first request
    init_notes: list[str] = field(default_factory=list)  # why a model was built on the host (`model_init`)
    _next_model: int = 0
    _next_call: int = 0
    _next_pool: int = 0
    _free: dict[Any, list[Any]] = field(default_factory=dict)
    _lent: list[Any] = field(default_factory=list)
    probes: ProbePlanner | None = None  # probe calls among the correctness calls (CPU only)
    #: The last profiled forward: (kernel microseconds by name, the runner's hook points found replaced).
    profiled: tuple[dict[str, float], tuple[str, ...]] | None = None
    kernel_tracer: str = ""
    #: Lets go of the judge's shared hold of the device while the candidate compiles (`DeviceLock.released`).
    release_device: Callable[[], Any] | None = None
    pauses: device_lock.PauseLog = field(default_factory=device_lock.PauseLog)
    #: The judge's own work while the runner runs a correctness call (`reference.ahead.ahead_of_calls`).
    between_calls: Callable[[], None] | None = None
    #: Seconds a first call on a new shape may take where the language tunes its kernels then; 0: the call timeout.
    tune_budget: float = 0.0
    tuned: str = ""  # what the candidate's autotuner chose, as the last call reported it
    _shapes_seen: set[tuple[Any, ...]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.arena = Arena(self.device, transport=self.transport)
        if not self.device.startswith("cuda"):
            self.probes = ProbePlanner()

    def _announce(self) -> None:
        """Before a request: queued copies into shared memory landed, new buffers announced (MAX_FDS a frame)."""
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        infos, fds = self.arena.pending()
        fd_iter = iter(fds)
        group: list[Any] = []
        group_fds: list[int] = []
        for info in infos:
            if info.kind == "fd":
                if len(group_fds) == MAX_FDS:
                    self.runner.send(protocol.Share(buffers=tuple(group)), group_fds)
                    group, group_fds = [], []
                group_fds.append(next(fd_iter))
            group.append(info)
        if group:
            self.runner.send(protocol.Share(buffers=tuple(group)), group_fds)

    def _expect(self, message: protocol.Message, kind: str, timeout: float | None = None, stage: str = "forward",
                meanwhile: Callable[[], None] | None = None):
        """Send `message` and wait for its reply of `kind`; `meanwhile()`, the judge's own work, runs in between."""
        self.post(message)
        if meanwhile is not None:
            meanwhile()
        reply = device_lock.reply_through_pauses(self.runner, kind, timeout or self.timeout, self.release_device,
                                                 self.pauses)
        if isinstance(reply, protocol.Fault):
            raise CandidateFailure(reply.stage if reply.stage in ("init", "compile", "load") else stage,
                                   RemoteError(reply))
        return reply

    def _buffer(self, shape: tuple[int, ...], dtype: torch.dtype, pooled: bool) -> tuple[torch.Tensor, TensorRef]:
        """A shared tensor: with `pooled`, a free one of this shape and dtype reused call after call."""
        key = (tuple(shape), dtype)
        item = self._free[key].pop() if pooled and self._free.get(key) else self.arena.tensor(tuple(shape), dtype)
        if pooled:
            self._lent.append((key, item))
        return item

    def lend_pool(self, pool: InputPool) -> None:
        """Let correctness calls use the timing pool's first input set and slot as shared buffers (one shared copy
        of large inputs, not two); timing then refills every set before its first batch (`pool.lent`)."""
        if not pool.sets:
            return
        pairs = [(v, r) for v, r in zip(pool.sets[0], pool.refs[0], strict=False) if isinstance(v, torch.Tensor)]
        if pool.slots:
            pairs.append((pool.slots[0], pool.slot_refs[0]))
        for view, ref in pairs:
            self._free.setdefault((tuple(view.shape), view.dtype), []).append((view, ref))
        pool.lent = True

    def share_arg(self, value: Any, pooled: bool = False) -> tuple[Any, Any]:
        """(the runner's reference to `value`, the judge-side shared object) for one argument."""
        if isinstance(value, torch.Tensor):
            shared, ref = self._buffer(tuple(value.shape), value.dtype, pooled)
            shared.copy_(value.detach())
            return ref, shared
        if isinstance(value, (list, tuple)):
            pairs = [self.share_arg(v, pooled) for v in value]
            return tuple(p[0] for p in pairs), type(value)(p[1] for p in pairs)
        return value, value

    def load(self, source: str, language: str, entry: str, precision: dict[str, Any], budget: float,
             meanwhile: Callable[[], None] | None = None) -> None:
        """Import the candidate in the runner; `meanwhile()` runs in the judge while the runner imports."""
        reply = self._expect(protocol.Load(source=source, language=language, entry=entry, device=self.device,
                                           precision=precision), "loaded", budget, "load", meanwhile)
        self.load_seconds, self.warmup_seconds = reply.seconds, reply.warmup_seconds

    def model(self, ref_model: Any, init: list[Any], seed: int, sizes: dict[str, Any] | None = None) -> RemoteModel:
        message = self._build(ref_model, init, seed, sizes)
        reply = self._expect(message, "built", stage="init")
        if reply.init_note and reply.init_note not in self.init_notes:
            self.init_notes.append(reply.init_note[:400])
        return RemoteModel(self, message.model)

    def _build(self, ref_model: Any, init: list[Any], seed: int, sizes: dict[str, Any] | None) -> protocol.Build:
        """A Build of the loaded class with `init`, the reference's weights shared for the runner to copy."""
        self._next_model += 1
        weights = ref_model.state_dict().items() if isinstance(ref_model, torch.nn.Module) else ()
        state = {name: self.share_arg(t)[0] for name, t in weights}
        refs = tuple(self.share_arg(v)[0] for v in init)
        return protocol.Build(model=self._next_model, init=refs, seed=seed, state=state,
                              sizes=_plain_sizes(sizes or {}),
                              init_device=model_init.built_on(ref_model, model_init.place_for(self.device)))

    # Queued requests: sent now, their replies read in order later by `collect` (`reference/runner.py`).
    def post(self, message: protocol.Message) -> None:
        self._announce()
        self.runner.send(message)

    def post_load(self, source: str, language: str, entry: str, precision: dict[str, Any]) -> None:
        self.post(protocol.Load(source=source, language=language, entry=entry, device=self.device, precision=precision))

    def post_model(self, ref_model: Any, init: list[Any], seed: int, sizes: dict[str, Any] | None = None) -> int:
        message = self._build(ref_model, init, seed, sizes)
        self.post(message)
        return message.model

    def post_pool(self, input_refs: list[tuple[Any, ...]], slot_refs: list[TensorRef]) -> int:
        """`register_pool` without waiting for the ping's pong."""
        pool = self._send_pool(input_refs, slot_refs)
        self._next_call += 1
        self.post(protocol.Ping(call=self._next_call))
        return pool

    def post_call(self, model: int, input_refs: tuple[Any, ...]) -> None:
        """An untimed warm-up call of `model` on inputs the runner already maps, its output dropped."""
        self._next_call += 1
        self.post(protocol.Call(call=self._next_call, model=model, inputs=tuple(input_refs), slots=(), poison=False))

    def ping(self, timeout: float) -> None:
        self._next_call += 1
        self._expect(protocol.Ping(call=self._next_call), "pong", timeout)

    def collect(self, kind: str, deadline: float) -> protocol.Message:
        """The reply of the oldest posted request, which must be `kind`; a Fault raises CandidateFailure."""
        reply = self.runner.receive({kind}, deadline)
        if isinstance(reply, protocol.Fault):
            raise CandidateFailure(reply.stage or "load", RemoteError(reply))
        return reply

    def call(self, model: int, inputs: list[Any], out_like: list[torch.Tensor],
             seed: int | None = None) -> tuple[Any, list[Any]]:
        """One call on shared copies of `inputs` (the runner seeds the global RNG with `seed` first): (outputs as
        judge tensors or stand-ins, the shared inputs as the call left them)."""
        self._next_call += 1
        for key, item in self._lent:  # the previous call's buffers: its outputs were cloned, its inputs compared
            self._free.setdefault(key, []).append(item)
        self._lent.clear()
        pairs = [self.share_arg(x, pooled=True) for x in inputs]
        buffers = [self._buffer(tuple(like.shape), like.dtype, pooled=True) for like in out_like]
        slots, slot_refs = [t for t, _ in buffers], [ref for _, ref in buffers]
        probe = self.probes.plan(model, inputs, out_like) if self.probes is not None else 0
        message = protocol.Call(call=self._next_call, model=model, inputs=tuple(p[0] for p in pairs),
                                slots=tuple(slot_refs), seed=seed, record=self.record_ops, probe_ns=probe)
        timeout = self._tuning_timeout(inputs)
        self._announce()  # the runner's CPU time and the judge's clock are read around the request only
        before, started = self.runner.cpu_ns(), time.perf_counter()
        reply = self._expect(message, "output", timeout, meanwhile=self.between_calls)
        wall, after = time.perf_counter() - started, self.runner.cpu_ns()
        cpu = after - before if before is not None and after is not None else None
        self.tuned = reply.tuned or self.tuned
        if self.probes is not None:
            self.probes.reported(reply.launch.launches, cpu)
        passthrough = reply.launch.outputs_prefilled_unchanged and _equals_an_input(
            [slots[k] for k, form in enumerate(reply.forms) if form.copied and k < len(slots)], [p[1] for p in pairs])
        self.reports.append(CallRecord(reply.launch, reply.forms, reply.seconds, ops=reply.ops, cpu_ns=cpu,
                                       wall_s=wall, passthrough=passthrough, model=model, probe_ns=probe,
                                       shapes=tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor))))
        outs = []
        for k, form in enumerate(reply.forms):
            if form.copied and k < len(slots):
                # Host staging: the slot is host memory, the output was on the device. A large output is read in its
                # slot, not copied: the caller judges or copies it before the next call reuses the slot.
                if slots[k].device.type != torch.device(form.device).type:
                    outs.append(slots[k].to(form.device))
                else:
                    big = slots[k].numel() * slots[k].element_size() > LARGE_OUTPUT_BYTES
                    outs.append(slots[k] if big else slots[k].clone())
            else:
                outs.append(_standin(form, self.device))
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        result = tuple(outs) if reply.tuple_output else (outs[0] if outs else None)
        return result, [p[1] for p in pairs]

    def _tuning_timeout(self, inputs: list[Any]) -> float | None:
        """The compile budget for the first call on inputs of this shape where the language tunes then."""
        shapes = tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs)
        if not self.tune_budget or shapes in self._shapes_seen:
            return None
        self._shapes_seen.add(shapes)
        return max(self.tune_budget, self.timeout)

    def probe_pair(self) -> None:
        """Repeat the last call as an ordinary and a probe call (`evidence/probe.py`) where the calls made no pair."""
        planner = self.probes
        if planner is None or planner.last_inputs is None or planner.last_model is None:
            return
        for _ in range(2):
            self.call(planner.last_model, planner.last_inputs, planner.last_out_like or [])

    def profile(self, model: int, inputs: list[Any]) -> dict[str, float]:
        self._next_call += 1
        refs = tuple(self.share_arg(x)[0] for x in inputs)
        reply = self._expect(protocol.Profile(call=self._next_call, model=model, inputs=refs), "profiled",
                             stage="profile")
        self.profiles.append(dict(reply.kernels))
        self.kernel_tracer = reply.tracer
        self.profiled = (dict(reply.kernels), tuple(reply.tampered))
        return dict(reply.kernels)

    def register_pool(self, input_refs: list[tuple[Any, ...]], slot_refs: list[TensorRef], timeout: float) -> int:
        """Send a timing pool once and wait until it is mapped; its id for `time`."""
        pool = self._send_pool(input_refs, slot_refs)
        self.ping(timeout)
        return pool

    def _send_pool(self, input_refs: list[tuple[Any, ...]], slot_refs: list[TensorRef]) -> int:
        self._next_pool += 1
        self.post(protocol.Pool(pool=self._next_pool, input_sets=tuple(tuple(s) for s in input_refs),
                                slots=tuple(slot_refs)))
        return self._next_pool

    def time(self, model: int, pool: int, order: list[int], timeout: float, seeds: tuple[int, ...] = (),
             null_like: torch.Tensor | None = None) -> tuple[protocol.Samples, float]:
        """One timed batch on a registered pool (call k on set order[k], its output into that set's slot) and the
        judge's clock around it, in seconds. `null_like`: what the null candidate returns (`protocol.NULL_MODEL`)."""
        self._next_call += 1
        null = {} if null_like is None else {"null_shape": tuple(null_like.shape),
                                             "null_dtype": str(null_like.dtype).removeprefix("torch.")}
        msg = protocol.Time(call=self._next_call, model=model, pool=pool, order=tuple(order), seeds=tuple(seeds),
                            **null)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()  # every copy the judge queued into shared memory has landed
        started = time.perf_counter()
        reply = self.runner.request(msg, {"samples"}, timeout)
        elapsed = time.perf_counter() - started
        if isinstance(reply, protocol.Fault):
            raise CandidateFailure("timing", RemoteError(reply))
        return reply, elapsed

    def close(self, wait: bool = True) -> None:
        """Kill the runner and give back the shared memory; `wait` False leaves both to `release`."""
        self.runner.close(wait=False)
        if wait:
            self.release()

    def release(self) -> None:
        """After `close(wait=False)`: the runner's exit waited for, then the shared memory given back."""
        self.runner.reap()
        self.arena.close()


def _equals_an_input(outputs: list[torch.Tensor], inputs: list[Any]) -> bool:
    """Whether some output holds exactly the bytes of an input of the same shape and dtype."""
    flat = [x for x in as_list(inputs) if isinstance(x, torch.Tensor)]
    return any(x.shape == out.shape and x.dtype == out.dtype and
               torch.equal(bytes_per_element(out), bytes_per_element(x.to(out.device)))
               for out in outputs for x in flat)


def _plain_sizes(sizes: dict[str, Any]) -> dict[str, Any]:
    """Size constants as the protocol carries them: numbers, strings, tuples of numbers; a dtype by its name."""
    out: dict[str, Any] = {}
    for key, value in sizes.items():
        if isinstance(value, torch.dtype):
            value = str(value).removeprefix("torch.")
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, (bool, int, float, str)) or (isinstance(value, tuple) and all(
                isinstance(v, (int, float)) for v in value)):
            out[key] = value
    return out


class RemoteModel:
    """A candidate model that lives in the runner; the correctness protocol calls it like a local one."""

    remote = True

    def __init__(self, session: CandidateSession, model_id: int):
        self.session, self.model_id = session, model_id

    def call(self, inputs: list[Any], out_like: list[torch.Tensor], seed: int | None = None) -> tuple[Any, list[Any]]:
        return self.session.call(self.model_id, inputs, out_like, seed)
