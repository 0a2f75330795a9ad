"""One evaluation inside the judge, as named stages: scan -> load -> check -> count -> time -> cover -> verdict.

The judge is trusted: it never imports candidate code. Candidate code runs in a fresh, sandboxed runner for this
evaluation only (`session.py`); every verdict below is computed here from what the judge itself measured (the
reference, the comparison, its own clock) and from data the runner reported (launches, forms, samples, kernel
profiles), which only ever counts against the candidate. Each stage either returns or raises `Stop` with a reply;
the driver `run()` turns runner deaths and protocol violations into replies too.
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch

from workbench.errors import TaskError
from workbench.eval import compile_cache, faults, guards, judge_timing, static_checks, stats, timing
from workbench.eval.correctness import CandidateFailure, build_models, run_correctness
from workbench.eval.counting import count_work
from workbench.eval.findings import Finding, first_per_flag, verdict
from workbench.eval.judge_pool import DEFAULT_COMPILE_TIMEOUT
from workbench.eval.runner_process import Limits, RunnerDied, RunnerProcess, RunnerViolation
from workbench.eval.session import CandidateSession, RemoteError
from workbench.tasks import precision
from workbench.tasks.task import LoadedReference, Task


class Stop(Exception):
    """A stage ended the evaluation; `reply` is what the caller gets."""

    def __init__(self, reply: dict[str, Any]):
        self.reply = reply
        super().__init__(reply.get("status", ""))


@dataclass
class Context:
    """What the judge process provides to an evaluation: references it already built, its fork server, and how
    shared memory reaches its runners (CUDA IPC where the sandbox allows it, else host staging)."""

    references: dict[str, LoadedReference]
    fork_server: Any
    workdir: str
    transport: str = "auto"
    share_ipc: bool = False
    transport_note: str = ""
    #: Per (task, size, device): FLOP/byte counts and compiled references, reused across candidates (the most
    #: recent few only: a study over hundreds of tasks must not keep every compiled model on the GPU).
    counted: dict[Any, Any] = field(default_factory=lambda: _Recent(64))
    compiled: dict[Any, Any] = field(default_factory=lambda: _Recent(4))


class _Recent(OrderedDict):
    """A dict that keeps only its `limit` most recently set entries."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


def probe_transport(server: Any, device: str) -> tuple[str, bool, str]:
    """(transport, share the IPC namespace?, note) for GPU runners: CUDA IPC with a private IPC namespace, else
    with the judge's IPC namespace shared (PID, network and mount stay private), else pinned host staging."""
    if not device.startswith("cuda"):
        return "fd", False, ""
    from workbench.eval import protocol
    from workbench.eval.shared import Arena

    notes = []
    for share_ipc in (False, True):
        arena = None
        try:
            with RunnerProcess.start(server, device, share_ipc=share_ipc) as runner:
                arena = Arena(device, transport="cuda-ipc")
                t, _ = arena.tensor((4,), torch.float32)
                infos, fds = arena.pending()
                runner.send(protocol.Share(buffers=infos), fds)
                reply = runner.request(protocol.Ping(call=1), {"pong"}, 60)
                if isinstance(reply, protocol.Pong):
                    return "cuda-ipc", share_ipc, "" if not notes else "; ".join(notes)
                notes.append(f"CUDA IPC {'with' if share_ipc else 'without'} a shared IPC namespace: "
                             f"{reply.message[:200]}")
        except (RunnerDied, RunnerViolation, RuntimeError, OSError) as exc:
            notes.append(f"CUDA IPC {'with' if share_ipc else 'without'} a shared IPC namespace: {exc}")
        finally:
            if arena is not None:
                arena.close()
    return "fd", False, "host staging (" + "; ".join(notes) + ")"


@dataclass
class Evaluation:
    job: dict[str, Any]
    ctx: Context
    task: Task = field(init=False)
    device: str = field(init=False)
    base: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    session: CandidateSession | None = None

    def __post_init__(self) -> None:
        self.task = Task.from_spec(self.job["task"])
        self.cand = self.job["candidate"]
        self.device = self.job["device"]
        self.seed = int(self.job.get("seed", 0))
        self.timeout = float(self.job.get("timeout", 60.0))
        self.policy = getattr(self.task, "kernel_policy", "strict") or "strict"
        self.precision = self.task.precision
        self.base = {"versions": {}, "device_name": "", "sandbox": self.ctx.fork_server.sandbox,
                     "kernel_policy": self.policy, "precision": self.precision.name, "protocol": {}}

    # ---- driver ---------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        # The task's precision policy around every reference computation in the judge (the runner applies it too).
        with precision.applied(self.precision, self.device):
            return self._run()

    def _run(self) -> dict[str, Any]:
        stages = self.base["protocol"].setdefault("stage_seconds", {})

        def stage(name: str, fn: Any, *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args)
            finally:
                if self.device.startswith("cuda"):
                    # Memory the judge freed goes back to the driver: the runner, another process, needs it.
                    gc.collect()
                    torch.cuda.empty_cache()
                stages[name] = round(stages.get(name, 0.0) + time.perf_counter() - started, 3)

        try:
            stage("scan", self.scan)
            stage("load", self.load)
            report = stage("check", self.check)
            result = self.assess(report)
            stage("count", self.count, result)
            if self.job.get("time_it", True):
                stage("time", self.time, result)
            return self.finish(result)
        except Stop as stop:
            return {**self.base, "warnings": self.warnings, **stop.reply}
        except CandidateFailure as exc:
            return {**self.base, "warnings": self.warnings, **self._candidate_failure(exc)}
        except RunnerDied as died:
            return {**self.base, "status": died.kind, "died": died.detail, "log": died.log,
                    "message": faults.died_message(died.kind, died.detail, died.log, self.cand["source"],
                                                   self.cand["language"], self.device, self.timeout)}
        except RunnerViolation as bad:
            return {**self.base, "status": "rejected", "flags": ["protocol-violation"], "log": bad.log,
                    "message": Finding("protocol-violation", bad.detail).line()}
        except TaskError as exc:
            return {**self.base, "status": "runtime_error", "message": f"the task failed: {exc}",
                    "log": traceback.format_exc()[-3000:]}
        except (torch.cuda.OutOfMemoryError, MemoryError, RuntimeError) as exc:
            if not faults.out_of_memory(type(exc).__name__, str(exc)) and "cuMemAlloc failed with error 2" not in \
                    str(exc):
                raise
            return {**self.base, "status": "runtime_error", "message": self._too_big(exc),
                    "log": traceback.format_exc()[-3000:]}
        finally:
            if self.session is not None:
                self.session.close()
            gc.collect()
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()

    def _too_big(self, exc: BaseException) -> str:
        """The judge's own out-of-memory: the task at this size does not fit beside the protocol's copies."""
        need = ""
        try:
            from workbench.tasks.footprint import estimate_footprint

            fp = estimate_footprint(self.task, self.job["size"], self.device, self.reference())
            if fp is not None:
                out = f", one output {fp.output_bytes / 2**30:.2f} GiB" if fp.output_bytes else ""
                need = f" (one input set {fp.input_bytes / 2**30:.2f} GiB{out})"
        except Exception:  # noqa: BLE001 - the estimate only adds detail
            pass
        where = "GPU" if self.device.startswith("cuda") else "host"
        return (f"the task does not fit in {where} memory at this size{need}: the judge keeps the inputs, a float64 "
                f"reference and the candidate's outputs, and ran out ({type(exc).__name__}: {str(exc)[:200]}). "
                "Evaluate a smaller size (size={...}) or on a device with more memory.")

    def _candidate_failure(self, exc: CandidateFailure) -> dict[str, Any]:
        original = exc.original
        if isinstance(original, RemoteError):
            f = original.fault
            return faults.failure_reply(f.exc_type, f.message, exc.stage, f.candidate_line, f.log)
        return faults.failure_reply(type(original).__name__, str(original), exc.stage, "", exc.traceback_text)

    # ---- stages ---------------------------------------------------------------------------------------------
    def scan(self) -> None:
        """Static checks on the source (AST only: nothing of the candidate runs)."""
        if self.cand["language"] == "cuda" and not self.device.startswith("cuda"):
            raise Stop({"status": "compile_error", "message": (
                "this candidate is CUDA C++ (torch.utils.cpp_extension.load_inline): it needs a CUDA device. "
                "Evaluate it with device='cuda' on a machine with a GPU and nvcc.")})
        findings = _scan(self.cand, self.policy)
        self.warnings += [f.flag for f in findings if f.severity != "reject"]
        status, flags, message = verdict(findings)
        if status:
            raise Stop({"status": "rejected", "flags": flags, "message": message})

    def load(self) -> None:
        """A fresh runner for this candidate, and the candidate imported in it (compilation has its own budget)."""
        memory = self.job.get("memory_bytes")
        cached, entry_key = None, None
        if self.cand["language"] == "cuda":
            entry_key = compile_cache.key(self.cand["source"], "cuda")
            cached = compile_cache.lookup(entry_key)
        binds = [(str(cached), compile_cache.MOUNT_POINT)] if cached is not None else []
        runner = RunnerProcess.start(self.ctx.fork_server, self.device, Limits(memory_bytes=memory), binds,
                                     share_ipc=self.ctx.share_ipc)
        self.session = CandidateSession(runner, self.device, self.timeout, self.ctx.transport)
        self.base["protocol"]["runner_pid"] = runner.inner_pid
        if cached is not None and runner.workdir:  # no sandbox: no bind, the judge copies the entry in
            compile_cache.copy_entry(cached, os.path.join(runner.workdir, "torch_extensions"))
        ready = runner.ready
        self.base.update(versions=dict(ready.versions), device_name=ready.device_name, sandbox=ready.sandbox)
        if ready.sandbox != "namespaces":
            self.base["sandbox_reason"] = ready.sandbox_reason
        budget = float(self.job.get("compile_timeout") or DEFAULT_COMPILE_TIMEOUT)
        try:
            self.session.load(self.cand["source"], self.cand["language"], self.cand.get("entry", "ModelNew"),
                              self.precision.to_spec(), budget)
        except CandidateFailure as exc:
            f = exc.original.fault if isinstance(exc.original, RemoteError) else None
            raise Stop({"status": "compile_error", "message": str(exc.original),
                        "log": f.log if f else ""}) from None
        except RunnerDied as died:
            if died.kind == "timeout":
                raise Stop({"status": "timeout", "message": (
                    f"timeout: loading the candidate took more than its compile budget of {budget:g} s (CUDA "
                    "compilation included). Raise it with evaluate(..., compile_timeout=seconds).")}) from None
            raise
        self.base["protocol"].update(load_seconds=round(self.session.load_seconds, 3),
                                     transport=self.session.arena.transport, runner_pid=runner.inner_pid,
                                     ipc_namespace="shared" if self.ctx.share_ipc else "private")
        if self.ctx.transport_note:
            self.base["protocol"]["transport_note"] = self.ctx.transport_note
        if entry_key is not None:
            self.base["protocol"]["compile_seconds"] = round(self.session.load_seconds, 3)
            self.base["protocol"]["compile_cache"] = "hit" if cached is not None else "miss"
            if cached is None:
                build = (os.path.join(runner.workdir, "torch_extensions") if runner.workdir else
                         f"/proc/{runner.inner_pid}/root/tmp/torch_extensions")
                if compile_cache.store(entry_key, build) is not None:
                    self.base["protocol"]["compile_cache"] = "stored"

    def reference(self) -> LoadedReference:
        key = self.task.source_hash
        if key not in self.ctx.references:
            self.ctx.references[key] = LoadedReference(self.task, self.ctx.workdir)
        return self.ctx.references[key]

    def check(self):
        """The correctness protocol, with every candidate call made in the runner."""
        check_sizes = [self._cpu_safe(s) for s in self.job["check_sizes"]]
        return run_correctness(self.reference(), self.session, device=self.device, sizes=check_sizes,
                               seed=self.seed, rounds=int(self.job.get("rounds", 5)), tolerance=self.task.tolerance,
                               distributions=self.task.distributions)

    def assess(self, report: Any) -> dict[str, Any]:
        """Correctness findings, plus what the runner's reports show: no own kernel launched, output not produced by
        one, threads left running."""
        findings = list(report.findings)
        findings += guards.judge_launches([r.launch for r in self.session.reports], self.cand["language"])
        findings += guards.judge_threads([r.launch for r in self.session.reports])
        result: dict[str, Any] = {
            "max_abs_err": report.max_abs_err, "max_rel_err": report.max_rel_err,
            "details": {"rounds": report.rounds, "error_map": report.error_map, "notes": report.notes + self.notes},
            "error_budget": getattr(report, "error_budget", {}) or {},
        }
        status, flags, message = verdict(first_per_flag(findings))
        self.warnings += [f for f in flags if f not in self.warnings and not _rejects(f, findings)]
        if status:
            raise Stop({**result, "status": status, "flags": [f for f in flags if _rejects(f, findings)],
                        "message": message})
        result["message"] = message
        return result

    def count(self, result: dict[str, Any]) -> None:
        """FLOPs and minimal bytes of the reference at the timed size (advisory)."""
        size = self._cpu_safe(self.job["size"])
        ref = self.reference()
        self.ref_model, _ = build_models(ref, _NoCandidate, size, self.device, self.seed)
        self.time_size = size
        key = (self.task.source_hash, repr(sorted(size.items())), self.device)
        if key not in self.ctx.counted:
            try:
                self.ctx.counted[key] = count_work(self.ref_model, ref.make_inputs(size, self.seed + 101, self.device))
            except Exception as exc:  # noqa: BLE001 - counting is advisory
                self.ctx.counted[key] = {"flops": None, "bytes": None, "error": str(exc)}
        result["counted"] = self.ctx.counted[key]

    def time(self, result: dict[str, Any]) -> None:
        """Candidate (runner) and reference (judge) interleaved; committed outputs re-checked; bracket checked."""
        ref = self.reference()
        model = self.session.model(self.ref_model, ref.init_inputs(self.time_size, self.seed), self.seed,
                                   {**ref.defaults, **self.time_size})
        interpreted = os.environ.get("TRITON_INTERPRET") == "1" and self.cand["language"] == "triton"
        warm, _ = timing.default_reps(self.device, interpreted)
        warm = int(self.job.get("warmup", warm))
        reps = self.job.get("reps")
        rule = judge_timing.stopping_rule(self.device, interpreted, int(reps) if reps is not None else None)
        clock = "cuda-events" if self.device.startswith("cuda") else ("interpreter" if interpreted else "wall")
        compiled = None
        if self.device.startswith("cuda") and self.job.get("compile_reference", True):
            # Compiled once per task, size and seed in this judge (a compile takes seconds to minutes).
            key = (self.task.source_hash, repr(sorted(self.time_size.items())), self.seed, self.device)
            if key not in self.ctx.compiled:
                self.ctx.compiled[key] = _compiled(self.ref_model, ref.make_inputs(self.time_size, self.seed + 101,
                                                                                   self.device), self.notes)
            compiled = self.ctx.compiled[key]
            if compiled is None:
                self.notes.append("torch.compile of the reference failed earlier in this judge; compiled line omitted")
        sensors = _telemetry(self.device)
        try:
            outcome = judge_timing.time_pair(self.session, model.model_id, self.ref_model, compiled, ref,
                                             size=self.time_size, seed=self.seed, device=self.device, clock=clock,
                                             warmup=warm, rule=rule, tolerance=self.task.tolerance,
                                             telemetry=sensors)
        finally:
            if sensors is not None:
                result["telemetry"] = sensors.summary()
                sensors.close()
        if clock != "interpreter":
            ab = stats.compare(outcome.reference.samples_ms, outcome.candidate.samples_ms)
            result.update(speedup_ci=[ab.low, ab.high], speedup_verdict=ab.verdict, speedup_basis="gpu-only"
                          if clock == "cuda-events" else "wall")
        result["timing"] = outcome.candidate.to_dict()
        result["reference_timing"] = outcome.reference.to_dict()
        if clock == "interpreter":  # the reference is compiled PyTorch code, timed on the same wall clock
            result["reference_timing"]["clock"] = "wall"
        if outcome.compiled is not None:
            result["compiled_reference_timing"] = outcome.compiled.to_dict()
        if outcome.launch_reference is not None:
            result["launch_reference_timing"] = outcome.launch_reference.to_dict()
            result["launch_candidate_timing"] = outcome.launch_candidate.to_dict()
        self.base["protocol"].update(outcome.protocol)
        late = list(outcome.findings)
        if self.device.startswith("cuda"):
            late += self.cover(result, model.model_id)
        status, flags, message = verdict(first_per_flag(late))
        self.warnings += [f for f in flags if f not in self.warnings and not _rejects(f, late)]
        if status:
            raise Stop({**result, "status": status, "flags": [f for f in flags if _rejects(f, late)],
                        "message": message})
        if clock == "interpreter":
            result["details"]["notes"].append("interpreter timing: measures Triton's CPU interpreter, not hardware; "
                                              "no speedup is reported")

    def cover(self, result: dict[str, Any], model_id: int) -> list[Finding]:
        """Share of GPU kernel time in the candidate's own kernels (names from its source, not from the runner)."""
        if self.cand["language"] == "torch":
            return []
        ref = self.reference()
        kernels = self.session.profile(model_id, ref.make_inputs(self.time_size, self.seed + 101, self.device))
        own = guards.own_kernel_names(self.cand["source"])
        coverage, findings = guards.judge_coverage(kernels, own, self.policy)
        result["coverage"] = coverage
        findings += guards.judge_host_work(kernels, result["timing"]["median_ms"])
        return findings

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        result.pop("message", None)
        return {**self.base, **result, "status": "ok", "flags": [], "warnings": self.warnings,
                "message": ""}

    # ---- helpers --------------------------------------------------------------------------------------------
    def _cpu_safe(self, size: dict[str, Any]) -> dict[str, Any]:
        """bf16 arithmetic returns 0 in Triton's interpreter: run those sizes in fp32, visibly."""
        interp = os.environ.get("TRITON_INTERPRET") == "1"
        if self.device.startswith("cuda") or not interp or size.get("dtype") not in ("bfloat16", torch.bfloat16):
            return size
        if "interpreter-bf16" not in self.warnings:
            self.warnings.append("interpreter-bf16")
            self.notes.append("bf16 is broken in Triton's interpreter: this CPU run used float32; run on a GPU for "
                              "a bf16 verdict")
        return {**size, "dtype": "float32"}


class _NoCandidate:
    """build_models' candidate when only the reference is needed."""

    def __init__(self, *args: Any) -> None:
        pass


def _telemetry(device: str):
    """NVML sensors for the device's timed batches (None on the CPU; an "unavailable" summary without NVML)."""
    if not device.startswith("cuda"):
        return None
    from workbench.eval.telemetry import Telemetry

    index = torch.device(device).index or 0
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # noqa: BLE001 - older torch: fall back to the index
        uuid = None
    # Sustained heavy kernels run at the power cap by design: flagged in the telemetry, not dropped.
    return Telemetry(index, uuid=uuid, keep_power_capped=True)


def _scan(cand: dict[str, Any], policy: str) -> list[Finding]:
    return static_checks.scan(cand["source"], cand["language"], cand.get("entry", "ModelNew"), policy=policy)


def _rejects(flag: str, findings: list[Finding]) -> bool:
    return any(f.flag == flag and f.severity == "reject" for f in findings)


def _compiled(ref_model: Any, inputs: list[Any], notes: list[str]):
    try:
        fn = torch.compile(ref_model)
        with torch.no_grad():
            fn(*inputs)
        return fn
    except Exception as exc:  # noqa: BLE001
        notes.append(f"torch.compile of the reference failed ({type(exc).__name__}); compiled line omitted")
        return None

