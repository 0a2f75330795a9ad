"""The runner: the untrusted, sandboxed process forked for one candidate, running exactly the calls the judge asks for.
It holds no reference and no checking code; everything it says beside the shared-memory outputs is data the judge
cross-checks, so a candidate that rewrites this code can only falsify its own reports."""

from __future__ import annotations

import gc
import os
import sys
import time
import traceback
from contextlib import nullcontext as _null
from typing import Any

import torch
import torch.profiler

from workbench import languages
from workbench.eval.runner import compile_pause, kernel_trace, launches, library_warmup, op_record, seal
from workbench.eval.runner.poison import Poison
from workbench.eval.wire import model_init
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire import timed_loop as timing
from workbench.eval.wire.process_env import versions as _versions
from workbench.eval.wire.shared_memory import Mapping, dtype_name
from workbench.eval.wire.timed_loop import cpu_timing_threads
from workbench.eval.wire.transport import Channel
from workbench.seeding import seed_all

# Bound before any candidate is imported: replacing these module attributes changes nothing (`seal.py` reports it).
_track_launches, _report, _LaunchLog = launches.track_launches, launches.report, launches.LaunchLog
_kernel_names, _thread_idents = launches.kernel_names, launches.thread_idents
_encode, _channel_send, _recording = protocol.encode, Channel.send, op_record.recording
_profile, _ProfilerActivity = torch.profiler.profile, torch.profiler.ProfilerActivity
_KernelTracer, _TraceUnavailable = kernel_trace.KernelTracer, kernel_trace.TraceUnavailable
# The copy-out into the judge's slots runs none of the candidate's code: no method looked up on its output, no Tensor
# method it may have replaced, no torch function or dispatch mode it pushed (docs/anti-cheating.md, cheat 24).
_Tensor, _detach, _copy = torch.Tensor, torch._C.TensorBase.detach, torch._C.TensorBase.copy_
_no_torch_function, _no_dispatch, _type = torch._C.DisableTorchFunction, torch._C._DisableTorchDispatch, type


def copy_out(slot: torch.Tensor, out: Any) -> bool:
    """Copy `out` into `slot` when it is exactly a dense tensor of the slot's shape and dtype; whether it was."""
    if _type(out) is not _Tensor or out.shape != slot.shape or out.dtype != slot.dtype:
        return False
    with _no_torch_function(), _no_dispatch():
        _copy(slot, _detach(out))
    return True


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    import platform
    interp = ", Triton interpreter" if os.environ.get("TRITON_INTERPRET") == "1" else ""
    return f"cpu ({platform.processor() or platform.machine()}){interp}"


def candidate_line(tb_text: str, module_file: str | None) -> str:
    """' at candidate line N in fn: <code>' for the innermost traceback frame inside the candidate's file."""
    import re

    if not module_file:
        return ""
    lines = tb_text.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = re.search(r'File "([^"]+)", line (\d+), in (\S+)', lines[i])
        if m and m.group(1) == module_file:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f" at candidate line {m.group(2)} in {m.group(3)}" + (f": {code}" if code else "")
    return ""


class Runner:
    """State of one runner: the channel, the mapped buffers, the candidate module and its built models."""

    def __init__(self, channel: Channel, job: str, nonce: str, device: str):
        self.channel, self.job, self.nonce, self.device = channel, job, nonce, device
        self.cuda = device.startswith("cuda")
        self.cuda_ready = False
        self.tracer: Any = None
        self.seq_out = self.seq_in = 0
        self.mapping = Mapping(device)
        self.module: Any = None
        self.cls: Any = None
        self.language = "triton"
        self.models: dict[int, Any] = {}
        self.pools: dict[int, tuple[list[list[Any]], list[Any]]] = {}
        self.poison = Poison(device)
        self.threads = _thread_idents()
        self.seal: seal.Seal | None = None  # the hook points as they were just before the candidate's import
        self.probing = launches.no_probe  # sets a call's probe budget once the interpreter is wrapped
        self.pausable = False  # whether a compile may pause the judge's hold of the device now
        self.warmup_seconds = 0.0

    def send(self, message: protocol.Message) -> None:
        self.seq_out += 1
        _channel_send(self.channel, _encode(message, self.job, self.nonce, self.seq_out))

    def receive(self) -> tuple[protocol.Message, list[int]]:
        frame, fds = self.channel.recv()
        self.seq_in += 1
        return protocol.decode(frame, job=self.job, nonce=self.nonce, seq=self.seq_in,
                               allowed=protocol.JUDGE_KINDS), fds

    def await_proceed(self) -> None:
        """After a compile pause: the judge's Proceed (it holds the device again) before any GPU work."""
        msg, fds = self.receive()
        for fd in fds:
            os.close(fd)
        if not isinstance(msg, protocol.Proceed):
            raise RuntimeError(f"the judge answered a compile pause with {msg.kind!r}")

    def fault(self, stage: str, exc: BaseException, call: int = -1) -> None:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        where = candidate_line(tb, getattr(self.module, "__file__", None))
        kind = type(exc).__name__
        self.send(protocol.Fault(stage="compile" if kind in protocol.COMPILE_ERRORS else stage, exc_type=kind,
                                 message=str(exc)[:2000], candidate_line=where,
                                 log="\n".join(tb.strip().splitlines()[-25:]), call=call))

    def arg(self, value: Any, stage_inputs: bool = True) -> Any:
        if isinstance(value, protocol.TensorRef):
            t = self.mapping.tensor(value)
            if self.cuda and t.device.type == "cpu" and stage_inputs:  # host staging: the GPU gets a copy
                t = t.to(self.device)
            return t
        return [self.arg(v, stage_inputs) for v in value] if isinstance(value, tuple) else value

    def on_load(self, msg: protocol.Load) -> None:
        from workbench.eval.runner.loading import load_candidate
        from workbench.tasks.precision import apply as apply_precision  # for the whole runner: nothing to restore

        apply_precision(msg.precision or None)
        started = time.perf_counter()
        language = languages.get(msg.language)
        _no_library_threads()
        language.prepare_runner(self.device, os.environ.get("KWB_WORKDIR", "/tmp/work"))
        spec = {"source": msg.source, "language": msg.language, "entry": msg.entry}
        self.language = msg.language
        if not self.cuda and language.interpreted_on_cpu:
            self.probing = launches.interpreter_probe(language.probe_target())
        self.seal = _seal_hooks()
        try:
            self.module, self.cls = load_candidate(spec, self.device, os.environ.get("KWB_WORKDIR", "/tmp/work"))
            if self.cuda:
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001 - every load failure is the candidate's
            self.send(protocol.Fault(stage="load", exc_type=type(exc).__name__, message=str(exc)[:4000],
                                     log=getattr(exc, "log", "")[-4000:]))
            return
        kernels = tuple(sorted(_kernel_names(self.module, msg.source)))
        self.send(protocol.Loaded(kernels=kernels, seconds=time.perf_counter() - started,
                         build_dir=os.environ.get("TORCH_EXTENSIONS_DIR", ""),
                         warmup_seconds=round(self.warmup_seconds, 4)))

    def on_build(self, msg: protocol.Build) -> None:
        """Build the candidate where the judge built the reference and copy the reference's state in when its layout
        matches, finished before the reply (the judge may then reuse that memory)."""
        note = ""
        try:
            init = [self.arg(v) for v in msg.init]
            _apply_sizes(self.module, msg.sizes)
            host_only = msg.init_device == model_init.HOST  # the reference's constructor only ran there
            model, _, failed = model_init.build(lambda: self.cls(*init), self.device, lambda: seed_all(msg.seed),
                                                model_init.HOST if host_only else None)
            if failed is not None:
                note = model_init.BUILT_ON_HOST_NOTE.format(error=f"{type(failed).__name__}: {failed}"[:200])
            loaded = False
            if isinstance(model, torch.nn.Module):
                state = {k: self.arg(v) for k, v in msg.state.items()}
                if model_init.same_layout(model.state_dict(), state):
                    model.load_state_dict({k: v.detach() for k, v in state.items()})
                    loaded = True
                model = model.to(self.device).eval()
                if self.cuda:
                    torch.cuda.synchronize()
            self.models[msg.model] = model
        except BaseException as exc:  # noqa: BLE001
            self.fault("init", exc)
            return
        self.send(protocol.Built(model=msg.model, weights_loaded=loaded, init_note=note))

    def _forms_and_copy(self, out: Any, slots: tuple[protocol.TensorRef, ...]) -> tuple[tuple[protocol.OutputForm, ...], bool]:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        forms = []
        for i, o in enumerate(outs):
            if type(o) is not torch.Tensor:  # a subclass is named with its module
                name = f"{type(o).__module__}.{type(o).__name__}" if isinstance(o, torch.Tensor) else type(o).__name__
                forms.append(protocol.OutputForm(type_name=name, plain=False))
                continue
            dense = o.layout == torch.strided and not o.is_nested and o.device.type != "meta"
            copied = dense and i < len(slots) and copy_out(self.mapping.tensor(slots[i]), o)
            forms.append(protocol.OutputForm(type_name="Tensor", plain=True, dtype=dtype_name(o.dtype),
                                             shape=tuple(o.shape), device=str(o.device), dense=dense, copied=copied))
        return tuple(forms), isinstance(out, (tuple, list))

    def _tuned(self) -> str:
        try:
            return languages.get(self.language).tuned_config(self.module)
        except Exception:  # noqa: BLE001 - the candidate's objects may be anything: no configuration then
            return ""

    def _broken(self) -> tuple[str, ...]:
        return self.seal.broken() if self.seal is not None else ()

    def on_call(self, msg: protocol.Call) -> None:
        model = self.models[msg.model]
        inputs = [self.arg(v) for v in msg.inputs]
        like = [x for x in inputs if isinstance(x, torch.Tensor)] + [self.mapping.tensor(s) for s in msg.slots]
        started = time.perf_counter()
        try:
            if msg.poison:
                self.poison.prepare(like)
            with _track_launches(self.module) as log, torch.no_grad():
                with self.poison.during_call() if msg.poison else _null(), self.probing(msg.probe_ns):
                    timing.seed_rng(msg.seed)
                    with _recording(self.module, msg.record) as record:
                        out = model(*inputs)
                log.observe(out)
                if self.cuda:
                    torch.cuda.synchronize()
            forms, is_tuple = self._forms_and_copy(out, msg.slots)
            if self.cuda:
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            self.fault("forward", exc, msg.call)
            return
        report = _report(log, self.threads, self._broken())
        del out
        if self.cuda:  # the poisoned blocks and the output go back to the driver: the judge shares this GPU
            torch.cuda.empty_cache()
        self.send(protocol.Output(call=msg.call, forms=forms, tuple_output=is_tuple, launch=report,
                         seconds=time.perf_counter() - started, ops=record.report(), tuned=self._tuned()))

    def _null_model(self, msg: protocol.Time) -> Any:
        """The null candidate: a tensor shaped like the task's output, and as NULL_KERNEL one tiny kernel per call."""
        from workbench.eval.wire.shared_memory import dtype_from_name

        out = torch.zeros(msg.null_shape, dtype=dtype_from_name(msg.null_dtype or "float32"), device=self.device)
        tick = torch.zeros(1, device=self.device)
        if msg.model == protocol.NULL_KERNEL:
            return lambda *xs: (tick.add_(1), out)[1]
        return lambda *xs: out

    def on_pool(self, msg: protocol.Pool) -> None:
        """Map a timing pool's sets and slots once; no reply."""
        self.pools[msg.pool] = ([[self.arg(v) for v in s] for s in msg.input_sets],
                                [self.mapping.tensor(s) for s in msg.slots])

    def on_time(self, msg: protocol.Time) -> None:
        null = msg.model in (protocol.NULL_MODEL, protocol.NULL_KERNEL)
        model = self._null_model(msg) if null else self.models[msg.model]
        sets, slots = self.pools[msg.pool]
        commits = [slots[k] for k in msg.order] if slots else []

        def commit(k: int, out: Any) -> None:
            if k < len(commits):
                copy_out(commits[k], out[0] if isinstance(out, (tuple, list)) else out)

        try:
            stream, device = timing.time_batch(lambda xs: model(*xs), sets, list(msg.order), device=self.device,
                                               after_rep=commit, seeds=msg.seeds)
            if self.cuda:
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            self.fault("timing", exc, msg.call)
            return
        threads = _report(_LaunchLog(), self.threads).threads_left
        self.send(protocol.Samples(call=msg.call, stream_ms=tuple(stream), device_ms=tuple(device), threads_left=threads))

    def on_profile(self, msg: protocol.Profile) -> None:
        model = self.models[msg.model]
        inputs = [self.arg(v) for v in msg.inputs]
        try:
            kernels, how = self._kernels_of(lambda: model(*inputs))
        except BaseException as exc:  # noqa: BLE001
            self.fault("profile", exc, msg.call)
            return
        self.send(protocol.Profiled(call=msg.call, kernels=kernels, tracer=how, tampered=self._broken()))

    def _kernels_of(self, call: Any) -> tuple[dict[str, float], str]:
        """{kernel: us} of one call: CUPTI directly, else the torch profiler."""
        with torch.no_grad():
            try:
                if self.tracer is None:
                    self.tracer = _KernelTracer()
                kernels = self.tracer.trace(call, torch.cuda.synchronize)
                if kernels:  # none at all is confirmed by the profiler below
                    return kernels, "cupti"
            except _TraceUnavailable:
                pass
            torch.cuda.synchronize()
            with _profile(activities=[_ProfilerActivity.CUDA]) as prof:
                call()
                torch.cuda.synchronize()
        return kernel_trace.profiler_kernels(prof.events()), "torch-profiler"

    def loop(self) -> None:
        handlers = {protocol.Load: self.on_load, protocol.Build: self.on_build, protocol.Call: self.on_call, protocol.Time: self.on_time,
                    protocol.Profile: self.on_profile, protocol.Pool: self.on_pool}
        while True:
            msg, fds = self.receive()
            if isinstance(msg, protocol.Shutdown):
                return
            if isinstance(msg, protocol.Share):
                try:
                    self.mapping.add(msg.buffers, fds)
                except Exception as exc:  # noqa: BLE001 - e.g. CUDA IPC refused here: the judge falls back
                    self.fault("share", exc)
                continue
            if isinstance(msg, protocol.Ping):
                self.send(protocol.Pong(call=msg.call))
                continue
            if self.cuda and not self.cuda_ready:
                torch.cuda.init()  # else `manual_seed` only queues its CUDA half (benchmarks/README.md)
                self.cuda_ready = True
            self.pausable = type(msg) in (protocol.Load, protocol.Build, protocol.Call)
            try:
                handlers[type(msg)](msg)
            finally:
                self.pausable = False


def _seal_hooks() -> seal.Seal:
    """Seal the hook points just before the import (after the build cache wrapped the extension loader)."""
    sealed = seal.Seal()
    for module in (launches, seal, protocol, kernel_trace, op_record, sys.modules[__name__]):
        sealed.add_module(module)
    for cls in (Runner, kernel_trace.KernelTracer, *op_record.RECORDERS):
        sealed.add_class(cls, f"{cls.__module__}.{cls.__name__}", *[k for k, v in vars(cls).items() if callable(v)])
    sealed.add("op_record.DISPATCH.__dynamo_disable", op_record.DISPATCH, "__dynamo_disable")
    seal.triton_entry_points(sealed)
    seal.torch_entry_points(sealed)
    return sealed


def _apply_sizes(module: Any, sizes: dict[str, Any]) -> None:
    """Set the candidate's module-level size constants named like the build's (KernelBench candidates copy them)."""
    for key, value in sizes.items():
        current = getattr(module, key, None)
        if current is None or callable(current) or isinstance(current, type(torch)):
            continue
        if key == "dtype" and isinstance(value, str):
            value = getattr(torch, value, current)
        elif isinstance(current, (tuple, list)) and isinstance(value, (list, tuple)):
            value = tuple(value) if isinstance(current, tuple) else list(value)
        setattr(module, key, value)


def serve(sock_fd: int, job: str, nonce: str, device: str, sandbox: str, reason: str,
          warm: tuple[str, ...] = ()) -> None:
    """The runner's main: announce itself, warm up the GPU libraries the judge named, answer until Shutdown."""
    import socket

    channel = Channel(socket.socket(fileno=sock_fd))
    # What was imported before the fork leaves the collector's reach (the poisoning collects before every call).
    gc.freeze()
    if not device.startswith("cuda"):
        cpu_timing_threads()
    runner = Runner(channel, job, nonce, device)
    compile_pause.bind(runner)
    compile_pause.install_triton()
    compile_pause.install_dynamo()
    runner.send(protocol.Ready(protocol=protocol.PROTOCOL, pid=os.getpid(), versions=_versions(),
                      device_name=_device_name(device), sandbox=sandbox, sandbox_reason=reason))
    runner.warmup_seconds = library_warmup.warm(device, warm)
    runner.loop()


def _no_library_threads() -> None:
    """`torch.compile` in a candidate compiles in its calling thread and tqdm starts no monitor thread: a compile pool
    or monitor left running after forward reads as work deferred past the timer (`thread-deferral`)."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.compile_threads = 1  # type: ignore[attr-defined]
    try:
        import tqdm
        tqdm.tqdm.monitor_interval = 0
    except Exception:  # noqa: BLE001 - no tqdm: no monitor either
        pass
