"""One evaluation inside the judge, as the stages run: scan -> load (calibrate) -> check -> count -> [compile] -> time
(cover) -> [ran] -> evidence -> verdict, the candidate in a fresh sandboxed runner (`runners/session.py`). Every stage
returns or ends through `judge/verdict.py`; `run()` turns runner deaths, violations and out-of-memory into verdicts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from roofline.counting import count_work
from workbench import languages
from workbench.errors import TaskError
from workbench.eval.checks import runtime as guards
from workbench.eval.checks import static_scan as static_checks
from workbench.eval.checks.evidence import Evidence
from workbench.eval.checks.what_ran import WhatRan
from workbench.eval.judge import memory_admission, verdict
from workbench.eval.judge.ceilings import measured_ceilings
from workbench.eval.judge.context import Context, task_key
from workbench.eval.judge.correctness.check import CandidateFailure, CheckReport, run_correctness
from workbench.eval.judge.device_lock import EXCLUSIVE, NONE, SHARED, held
from workbench.eval.judge.evidence import stage as evidence_stage
from workbench.eval.judge.reference import ahead, compiled
from workbench.eval.judge.reference import runner as reference_runner
from workbench.eval.judge.reference.rounds import ReferenceRounds, build_reference
from workbench.eval.judge.runners import faults
from workbench.eval.judge.runners.process import RunnerDied, RunnerViolation
from workbench.eval.judge.runners.session import CandidateSession, RemoteError
from workbench.eval.judge.runners.spare import Spare, SpareKey
from workbench.eval.judge.runners.start import close_runner, load_candidate, settle_spare, start_runner, start_spare
from workbench.eval.judge.timing import stage as timing_stage
from workbench.eval.judge.timing.pair import ReferenceSide
from workbench.eval.judge.verdict import Stop
from workbench.eval.wire import model_init
from workbench.eval.wire.diagnostics import Diagnostics
from workbench.eval.wire.judge_messages import CandidateSpec, Job
from workbench.result import BASELINE_POLICY
from workbench.tasks import precision
from workbench.tasks.task import LoadedReference, Task

#: The device lock each stage holds (`device_lock.py`); measurements within a stage take it exclusively.
STAGE_LOCKS = {"calibrate": SHARED, "time": EXCLUSIVE, "check": SHARED, "evidence": SHARED, "count": SHARED,
               "ran": SHARED, "cover": SHARED}


def _is_out_of_memory(exc: BaseException) -> bool:
    text = f"{exc} {exc.__cause__ or ''}"
    return "out of memory" in text.lower() or "cuMemAlloc failed with error 2" in text


@dataclass
class RunnerState:
    """The candidate's runner and what it was started with (`runners/start.py`)."""

    session: CandidateSession | None = None
    spare_key: SpareKey | None = None
    spare: Spare | None = None  # the spare runner this evaluation was given
    build_key: str | None = None  # the CUDA build cache's key for this source, and the entry found for it
    build_entry: Path | None = None
    triton_dir: Path | None = None


@dataclass
class Evaluation:
    """Everything one evaluation holds."""

    job: Job
    ctx: Context
    task: Task = field(init=False)
    candidate: CandidateSpec = field(init=False)
    device: str = field(init=False)
    seed: int = field(init=False)
    timeout: float = field(init=False)
    policy: str = field(init=False)  # the task's kernel policy, or "baseline" for a declared PyTorch baseline
    precision: precision.PrecisionPolicy = field(init=False)
    time_size: dict[str, Any] = field(init=False)  # bf16 made float32 under the interpreter (`_cpu_safe`)
    key: str = field(init=False)  # `context.task_key`
    # -- what the reply says beside the verdict --
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    evidence: Evidence = field(default_factory=Evidence)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    device_name: str = ""
    sandbox: str = ""
    sandbox_reason: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # -- the runner, the reference, the timing --
    runner: RunnerState = field(default_factory=RunnerState)
    plan: timing_stage.TimingPlan | None = None
    ran: WhatRan | None = None  # a static torch-compute finding waiting for what ran
    compile_job: compiled.CompileJob | None = None
    rounds_made_here: bool = False
    held_rounds: ReferenceRounds | None = None  # holding a round made ahead for a check that may not come
    _roof: tuple[dict[str, Any] | None, str] | None = None

    def __post_init__(self) -> None:
        self.task = Task.from_spec(self.job.task)
        self.key = task_key(self.task)
        self.candidate = self.job.candidate
        self.device, self.seed, self.timeout = self.job.device, self.job.seed, self.job.timeout
        self.policy = getattr(self.task, "kernel_policy", "strict") or "strict"
        if self.candidate.baseline and self.candidate.language == "torch":
            self.policy = BASELINE_POLICY  # a declared PyTorch baseline: timed, the kernel policy not applied
        self.precision = self.task.precision
        self.sandbox = self.ctx.fork_server.sandbox
        self.time_size = self._cpu_safe(self.job.size)

    @property
    def session(self) -> CandidateSession:
        assert self.runner.session is not None, "no runner yet: the load stage starts it"
        return self.runner.session

    def run(self, retry_out_of_memory: bool = True) -> dict[str, Any]:
        """The evaluation's reply fields (status decided by `judge/verdict.py`)."""
        self.ctx.tidy()  # what the last evaluation left for after its reply, if its caller did not run it yet
        with precision.applied(self.precision, self.device):  # around every reference computation in the judge
            reply = self._run()
        out_of_memory = reply.pop("out_of_memory", False)
        if out_of_memory and retry_out_of_memory and self.ctx.drop_device_caches(self.key):
            # What the judge kept of earlier tasks may have taken the memory: once more without it, only once.
            again = type(self)(self.job, self.ctx).run(retry_out_of_memory=False)
            again["diagnostics"].out_of_memory_retry = "judge caches dropped, evaluated once more"
            return again
        if out_of_memory:  # the caller may evaluate it again with the GPU to itself (`workbench/dispatch/pool.py`)
            reply["diagnostics"].out_of_memory = True
        return reply

    def _book(self) -> None:
        """Room on the GPU for a large evaluation, waited for before the judge allocates (`memory_admission.py`)."""
        lock = self.ctx.device_lock
        if not self.device.startswith("cuda") or lock is None:
            return
        key = (self.key, repr(sorted(self.job.size.items())))
        if key not in self.ctx.bookings:
            self.ctx.bookings[key] = memory_admission.need_for(self.task, self.job.size, self.device, self.reference)
        need = self.ctx.bookings[key]
        total = int(torch.cuda.mem_get_info(torch.device(self.device))[1])
        ledger = memory_admission.Ledger(lock.folder, lock.name, total)
        booking = ExitStack()  # held until the memory is given back after the reply (`Context.tidy`)
        waited = booking.enter_context(ledger.booked(need))
        self.ctx.after_reply.append(booking.close)
        if ledger.large(need):
            self.diagnostics.set(memory_booked_gib=round(need / 2**30, 2), memory_wait_s=round(waited, 2))
            self._add_wait(waited)

    def _run(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        try:
            self._stage("scan", self.scan)
            self._stage("load", self.load)
            result = self.assess(self._stage("check", self.check))
            self._stage("count", self.count, result)
            if self.job.time_it:
                compiled_ref = self._stage("compile", compiled.take_for_timing, self) if self.wants_compiled() \
                    else None
                self._stage("time", self.time, result, compiled_ref)
            if self.ran is not None and self.ran.pending:
                self._stage("ran", self.settle, result)
            self._stage("evidence", self.settle_evidence, result)
            self._stage("verdict", self.physics, result)
            return self._reply(verdict.accepted(result, self.warnings))
        except Stop as stop:
            return self._reply({**stop.reply, "warnings": self.warnings})
        except CandidateFailure as exc:
            if self.ran is not None and self.ran.pending:
                # A static torch-compute finding awaited a GPU profile that will not come now: it stands.
                return self._reply({"warnings": self.warnings, **verdict.rejected([self.ran.after_failure(
                    f"the candidate raised in the {exc.stage} stage ({str(exc)[:300]}) before a GPU profile could "
                    "show what ran")])})
            return self._reply({"warnings": self.warnings, **self._candidate_failure(exc)})
        except RunnerDied as died:
            return self._reply(verdict.runner_died(died.kind, died.detail, died.log, self.candidate.source,
                                                   self.candidate.language, self.device, self.timeout))
        except RunnerViolation as bad:
            return self._reply(verdict.protocol_violation(bad.detail, bad.log))
        except TaskError as exc:
            return self._reply(verdict.runtime_error(f"the task failed: {exc}", _is_out_of_memory(exc)))
        except (torch.cuda.OutOfMemoryError, MemoryError, RuntimeError) as exc:
            if not (faults.out_of_memory(type(exc).__name__, str(exc)) or "cuMemAlloc failed with error 2" in str(exc)):
                raise
            return self._reply(verdict.runtime_error(self._too_big(exc), out_of_memory=True))
        finally:
            self._release()

    def _reply(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The reply's fields: what the stages decided, and what every reply says."""
        reply = {"versions": self.versions, "device_name": self.device_name, "sandbox": self.sandbox,
                 "sandbox_reason": self.sandbox_reason, "kernel_policy": self.policy,
                 "precision": self.precision.name, "stage_seconds": self.stage_seconds,
                 "evidence": self.evidence.levels, **fields, "diagnostics": self.diagnostics}
        self.diagnostics.evidence = self.evidence.how
        if reply.get("timing"):
            ceilings, why_not = self._ceilings(reply["timing"]["clock"])
            if ceilings is not None:
                reply["ceilings"] = ceilings
            if why_not:
                self.diagnostics.ceilings = why_not
        return reply

    def _release(self) -> None:
        """What an evaluation lets go of as it ends, whatever its verdict."""
        if self.held_rounds is not None:  # a candidate that failed to import never used it
            self.held_rounds.drop_ahead()
        if self.compile_job is not None and self.compile_job.running:
            self.compile_job.take()  # it compiles under this evaluation's precision policy, restored as run ends
        if self.runner.session is not None:
            if self.session.pauses.count:
                self.diagnostics.compile_pauses = self.session.pauses.to_dict()
            close_runner(self)
        if self.plan is not None and self.plan.pool.keepable:
            self.ctx.keep_pool(self.timing_key, self.plan.pool)
        elif self.plan is not None:
            self.plan.pool.drop_reference_runner()
        self.plan = None  # its memory, and the judge's cached GPU memory, go back after the reply (`Context.tidy`)

    def _stage(self, name: str, fn: Any, *args: Any) -> Any:
        """One stage under its device lock; its seconds (the lock's in "wait") and peak GPU memory are recorded."""
        cuda = self.device.startswith("cuda") and torch.cuda.is_initialized()
        with self.hold_device(STAGE_LOCKS.get(name, NONE)):
            started = time.perf_counter()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            try:
                return fn(*args)
            finally:
                self.stage_seconds[name] = round(self.stage_seconds.get(name, 0.0) + time.perf_counter() - started, 3)
                if cuda:
                    peaks = self.diagnostics.judge_memory_gib
                    peaks[name] = round(max(peaks.get(name, 0.0), torch.cuda.max_memory_allocated() / 2**30), 2)

    @contextmanager
    def hold_device(self, mode: int) -> Iterator[None]:
        with held(self.ctx.device_lock, mode) as waited:
            self._add_wait(waited)
            yield

    def _add_wait(self, seconds: float) -> None:
        if seconds:
            self.stage_seconds["wait"] = round(self.stage_seconds.get("wait", 0.0) + seconds, 3)

    @contextmanager
    def _released(self) -> Iterator[Any]:
        """The shared hold let go while the candidate compiles."""
        lock = self.ctx.device_lock
        with lock.released() if lock is not None else nullcontext() as got:
            yield got
        if got is not None:
            self._add_wait(got.waited)

    def _too_big(self, exc: BaseException) -> str:
        """The judge's own out-of-memory: the task at this size does not fit beside the protocol's copies."""
        need = ""
        with suppress(Exception):  # the estimate only adds detail
            from workbench.tasks.footprint import estimate_footprint

            fp = estimate_footprint(self.task, self.job.size, self.device, self.reference())
            if fp is not None:
                out = f", one output {fp.output_bytes / 2**30:.2f} GiB" if fp.output_bytes else ""
                need = f" (one input set {fp.input_bytes / 2**30:.2f} GiB{out})"
        where = "GPU" if self.device.startswith("cuda") else "host"
        return (f"the task does not fit in {where} memory at this size{need}: the judge keeps the inputs, a float64 "
                f"reference and the candidate's outputs, and ran out ({type(exc).__name__}: {str(exc)[:200]}). "
                "Evaluate a smaller size (size={...}) or on a device with more memory.")

    def _candidate_failure(self, exc: CandidateFailure) -> dict[str, Any]:
        original = exc.original
        if isinstance(original, RemoteError):
            f = original.fault
            return verdict.candidate_failed(f.exc_type, f.message, exc.stage, f.candidate_line, f.log)
        return verdict.candidate_failed(type(original).__name__, str(original), exc.stage, "", exc.traceback_text)

    def scan(self) -> None:
        """Static checks on the source (AST only: nothing of the candidate runs)."""
        available = languages.get(self.candidate.language).availability(self.device)
        if not available.runs:
            verdict.compile_error(available.message)
        findings = static_checks.scan(self.candidate.source, self.candidate.language, self.candidate.entry,
                                      policy=self.policy)
        findings, self.ran = WhatRan.from_scan(findings, self.device, self.policy, self.candidate.language)
        verdict.stop_if_rejected(findings, self.warnings)

    def load(self) -> None:
        """A fresh runner; before the candidate is imported in it, the timing's pool and calibration."""
        self.runner.session = start_runner(self)
        self.session.release_device = self._released
        self._book()  # here, not earlier: the judge's warm-up of fake tensors has had the runner's start to finish
        if self.job.time_it:
            self._stage("calibrate", self._prepare_timing)
            compiled.start_for(self)  # first: where it outlasts the check, it sets the wall
            with self.hold_device(SHARED):  # weights copied to shared memory
                reference_runner.launch_for(self)
        with self.hold_device(SHARED):  # the candidate's import may already use the device
            load_candidate(self, meanwhile=self._while_importing)

    def _while_importing(self) -> None:
        """The judge's own work while the runner imports: the next candidate's runner, this one's rounds ahead."""
        start_spare(self)
        ahead.make_ahead(self)

    def _prepare_timing(self) -> None:
        interpreted = languages.get(self.candidate.language).interpreted(self.device)
        key = self.timing_key
        kept = self.ctx.take_pool(key)
        self.plan, self.ctx.timing[key] = timing_stage.prepare(
            self.session, self.reference(), self.reference_model(), self.time_size, self.seed, self.device,
            self.timeout, interpreted, self.ctx.timing.get(key), measuring=lambda: self.hold_device(EXCLUSIVE), kept=kept)
        pool = self.plan.pool
        self.diagnostics.set(calibration="reused" if self.plan.calibration_reused else "measured",
                             timing_pool="kept" if pool is kept else "new",
                             calibrate_phases={**pool.phases, "sets": pool.n,
                                               "set_mib": round(pool.set_bytes / 2**20, 1)})

    @property
    def timing_key(self) -> tuple[Any, ...]:
        return (self.key, repr(sorted(self.time_size.items())), self.seed, self.device)

    def reference(self) -> LoadedReference:
        return self.ctx.reference(self.task)

    def reference_model(self) -> Any:
        key = self.timing_key
        if key not in self.ctx.models:
            self.ctx.models[key] = build_reference(self.reference(), self.time_size, self.device, self.seed)
        return self.ctx.models[key]

    def check(self) -> CheckReport:
        """The correctness protocol, the reference's side from the judge's rounds."""
        sizes, rounds = ahead.plan(self)
        assert self.ran is not None
        self.session.record_ops = self.ran.wants_record
        if self.plan is not None:
            self.session.lend_pool(self.plan.pool)
        reference, cached = ahead.rounds_for(self)
        self.diagnostics.reference_cache = "hit" if cached else "miss"
        self.session.between_calls = ahead.ahead_of_calls(self, reference)
        try:
            report = run_correctness(self.reference(), self.session, device=self.device, sizes=sizes,
                                     seed=self.seed, rounds=rounds, tolerance=self.task.tolerance, reference=reference)
        finally:
            self.session.between_calls = None
            reference.drop_ahead()
            settle_spare(self)  # before the lock is let go: its warm-up stays out of other judges' timing
        self.diagnostics.check_phases = report.phases
        self.diagnostics.models_built_on = model_init.built_on(reference.model(0))
        placement = reference.float64_placements()
        if placement:
            self.diagnostics.float64_reference = "/".join(sorted(placement))
        return report

    def assess(self, report: CheckReport) -> dict[str, Any]:
        """Correctness findings and what the runner's reports show; the first checkpoint."""
        assert self.ran is not None
        findings = list(report.findings)
        records = self.session.reports
        findings += guards.judge_launches([r.launch for r in records], self.candidate.language,
                                          [r.passthrough for r in records])
        findings += guards.judge_threads([r.launch for r in records])
        findings += self.ran.after_check(records, report.passed)
        self.notes += self.ran.take_notes() + self.session.init_notes
        self.diagnostics.tuned_config = self.session.tuned or None
        findings += self._stage("evidence", evidence_stage.after_check, self,
                                any(f.severity == "reject" for f in findings))
        result: dict[str, Any] = {
            "max_abs_err": report.max_abs_err, "max_rel_err": report.max_rel_err,
            "details": {"rounds": report.rounds, "error_map": report.error_map,
                        "error_map_round": report.error_map_round, "notes": report.notes + self.notes},
            "error_budget": report.error_budget or {},
        }
        verdict.stop_if_rejected(findings, self.warnings, result)
        return result

    def count(self, result: dict[str, Any]) -> None:
        """FLOPs and minimal bytes of the reference at the timed size (advisory)."""
        key = (self.key, repr(sorted(self.time_size.items())), self.device)
        if key not in self.ctx.counted:
            try:
                self.ctx.counted[key] = count_work(self.reference_model(), self.sample_inputs())
            except Exception as exc:  # noqa: BLE001 - counting is advisory
                self.ctx.counted[key] = {"flops": None, "bytes": None, "error": str(exc)}
        result["counted"] = self.ctx.counted[key]

    def time(self, result: dict[str, Any], compiled_ref: Any = None) -> None:
        """The timed pair (`timing/pair.py`), then on a GPU the coverage of the candidate's kernels; a checkpoint."""
        assert self.plan is not None
        ref = self.reference()
        ref_model = self.reference_model()
        model = self.session.model(ref_model, ref.init_inputs(self.time_size, self.seed), self.seed,
                                   {**ref.defaults, **self.time_size})
        side = ReferenceSide(ref_model, compiled_ref, self.task.tolerance,
                             float(result.get("error_budget", {}).get("native_error") or 0.0),
                             runner=reference_runner.take_for_timing(self))
        try:
            late = timing_stage.run(self.session, model.model_id, self.plan, side, self.device,
                                    self.candidate.language, self.job.reps, result, self.diagnostics,
                                    self.ctx.timing.get(self.timing_key))
        finally:
            reference_runner.after_timing(self)
        if self.device.startswith("cuda") and self.candidate.language != "torch" and "timing" in result:
            coverage, found = self._stage("cover", timing_stage.cover, self.session, model.model_id, self.plan,
                                          self.candidate.source, self.policy, result["timing"]["median_ms"])
            result["coverage"] = coverage
            self.diagnostics.kernel_tracer = self.session.kernel_tracer
            late += found
        verdict.stop_if_rejected(late, self.warnings, result)
        if result.get("timing", {}).get("clock") == "interpreter":
            how = languages.get(self.candidate.language).cpu_runtime
            result["details"]["notes"].append(f"interpreter timing: measures {how}, not hardware; no speedup is "
                                              "reported")

    def settle(self, result: dict[str, Any]) -> None:
        """GPU: a static torch-compute finding decided by a profiled forward (`evidence/stage.settle`)."""
        verdict.stop_if_rejected(evidence_stage.settle(self, result), [], result)

    def settle_evidence(self, result: dict[str, Any]) -> None:
        """What the verdict rests on (`evidence/stage.py`)."""
        verdict.stop_if_rejected(evidence_stage.before_verdict(self, result), self.warnings, result)

    def physics(self, result: dict[str, Any]) -> None:
        """The last checkpoint: a time below the physical floor of the task's work on this device is never a win."""
        if "timing" not in result:
            return
        ceilings, _ = self._ceilings(result["timing"]["clock"])
        found = verdict.physics(self.task, self.job.size, self.device, self.device_name, result["timing"],
                                result.get("counted"), ceilings)
        verdict.stop_if_rejected(found, self.warnings, result)

    def _ceilings(self, clock: str | None) -> tuple[dict[str, Any] | None, str]:
        """The device's measured roofline ceilings where needed, once per evaluation."""
        if self._roof is None:
            self._roof = measured_ceilings(self.device, self.device_name, clock,
                                           measuring=lambda: self.hold_device(EXCLUSIVE))
        return self._roof

    def sample_inputs(self) -> list[Any]:
        """One input set at the timing size, the same draw every time."""
        return self.reference().make_inputs(self.time_size, self.seed + 101, self.device)

    def wants_compiled(self) -> bool:
        return self.device.startswith("cuda") and self.job.compile_reference

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
