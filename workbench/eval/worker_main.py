"""The worker's side: read JSON jobs on stdin, evaluate, answer one JSON line on the protocol channel.

The candidate's own prints go to stderr (fd 1 is redirected there), so nothing a candidate writes can forge
a reply. Import order matters: timing and checking functions are imported (and their identities recorded)
before any candidate module is, so patches a candidate makes later are detectable and ineffective.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
import traceback
from typing import Any

# The protocol channel is a private duplicate of stdout; fd 1 then points at stderr for everyone else.
_PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

import torch  # noqa: E402

from workbench.eval import compare, correctness, guards, static_checks, tensors, timing  # noqa: E402
from workbench.eval.counting import count_work  # noqa: E402
from workbench.eval.findings import Finding, first_per_flag, verdict  # noqa: E402
from workbench.eval.languages import CandidateLoadError, load_candidate  # noqa: E402
from workbench.tasks.task import LoadedReference, Task  # noqa: E402

INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
_REFERENCES: dict[str, LoadedReference] = {}


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:
        out["triton"] = "missing"
    return out


def _device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return f"cpu ({platform.processor() or platform.machine()})" + (", Triton interpreter" if INTERPRETER else "")


def _reference(task: Task) -> LoadedReference:
    key = task.source_hash
    if key not in _REFERENCES:
        _REFERENCES[key] = LoadedReference(task, os.environ.get("KWB_WORKDIR"))
    return _REFERENCES[key]


def _cpu_safe_size(size: dict[str, Any], device: str, warnings: list[str]) -> dict[str, Any]:
    """bf16 arithmetic returns 0 in Triton's interpreter: run those sizes in fp32, visibly."""
    if device.startswith("cuda") or not INTERPRETER or size.get("dtype") not in ("bfloat16", torch.bfloat16):
        return size
    if "interpreter-bf16" not in warnings:
        warnings.append("interpreter-bf16")
    return {**size, "dtype": "float32"}


def _cuda_fault(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("illegal memory access", "misaligned address", "device-side assert",
                                   "unspecified launch failure", "an illegal instruction"))


def _oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text or \
        "cannot allocate memory" in text


def _candidate_location(tb_lines: list[str], module_file: str | None) -> str:
    """' at candidate line N in fn: <code>' for the innermost traceback frame inside the candidate's file."""
    if not module_file:
        return ""
    for i in range(len(tb_lines) - 1, -1, -1):
        m = re.search(r'File "([^"]+)", line (\d+), in (\S+)', tb_lines[i])
        if m and m.group(1) == module_file:
            code = tb_lines[i + 1].strip() if i + 1 < len(tb_lines) else ""
            return f" at candidate line {m.group(2)} in {m.group(3)}" + (f": {code}" if code else "")
    return ""


def _failure_reply(exc: BaseException, stage: str, tb_text: str, module_file: str | None) -> dict[str, Any]:
    """A candidate's exception as a reply: the status, and the traceback lines inside the candidate file."""
    lines = tb_text.strip().splitlines()
    where = _candidate_location(lines, module_file)
    kind = f"{type(exc).__name__}: {exc}".strip()
    if _oom(exc):
        msg = (f"out of memory during {stage}{where}: {kind[:400]}. Allocate less: check the output and temporary "
               "buffer sizes, or run a smaller size.")
    elif _cuda_fault(exc):
        msg = (f"CUDA fault during {stage}{where}: {kind[:400]}. This usually means an out-of-bounds pointer: check "
               "masks on every tl.load/tl.store and the grid size. The worker was restarted.")
    else:
        msg = f"{stage} raised {kind[:600]}{where}"
    reply = {"status": "runtime_error", "message": msg, "log": "\n".join(lines[-25:])}
    if _cuda_fault(exc):
        reply["restart_worker"] = True
    if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure", "PTXASError", "UnsupportedLanguageConstruct"):
        reply["status"] = "compile_error"
        reply["message"] = f"Triton could not compile the kernel{where}: {kind[:800]}"
    return reply


def _prepare_inputs(ref: LoadedReference, size: dict, seed: int, device: str, n: int) -> list[list[Any]]:
    return [ref.make_inputs(size, seed + 101 * (i + 1), device, "default") for i in range(n)]


def evaluate_job(job: dict[str, Any]) -> dict[str, Any]:
    task = Task.from_spec(job["task"])
    cand = job["candidate"]
    device = job["device"]
    seed = int(job.get("seed", 0))
    warnings: list[str] = []
    notes: list[str] = []
    base = {"versions": _versions(), "device_name": _device_name(device)}

    if cand["language"] == "cuda" and not device.startswith("cuda"):
        return {**base, "status": "compile_error", "message": (
            "this candidate is CUDA C++ (torch.utils.cpp_extension.load_inline): it needs a CUDA device. "
            "Evaluate it with device='cuda' on a machine with a GPU and nvcc.")}

    # 1. Static checks: a rejecting finding stops everything before the candidate runs.
    findings = static_checks.scan(cand["source"], cand["language"], cand.get("entry", "ModelNew"))
    status, flags, message = verdict(findings)
    warn_flags = [f.flag for f in findings if f.severity != "reject"]
    if status:
        return {**base, "status": "rejected", "flags": flags, "message": message, "warnings": warn_flags}

    # 2. Import the candidate (after recording trusted identities).
    snapshot = guards.snapshot_trusted()
    try:
        module, cls = load_candidate(cand, device, job.get("workdir"))
    except CandidateLoadError as exc:
        return {**base, "status": "compile_error", "message": str(exc), "log": exc.log}
    if device.startswith("cuda"):
        torch.cuda.synchronize()

    ref = _reference(task)
    check_sizes = [_cpu_safe_size(s, device, warnings) for s in job["check_sizes"]]
    time_size = _cpu_safe_size(job["size"], device, warnings)
    if "interpreter-bf16" in warnings:
        notes.append("bf16 is broken in Triton's interpreter: this CPU run used float32; run on a GPU for a bf16 verdict")

    # 3. Correctness (with launch tracking and thread checks around every candidate call).
    launch_logs: list[guards.LaunchLog] = []
    thread_findings: list[Finding] = []

    class _Guard:
        def __enter__(self):
            self.baseline = guards.thread_baseline()
            self.tracker = guards.track_launches(module)
            self.log = self.tracker.__enter__()
            launch_logs.append(self.log)
            return self

        def observe(self, out):
            self.log.observe(out)

        def __exit__(self, *exc):
            self.tracker.__exit__(*exc)
            if exc[0] is None:
                thread_findings.extend(guards.check_threads(self.baseline))
            return False

    try:
        report = correctness.run_correctness(ref, cls, device=device, sizes=check_sizes, seed=seed,
                                       rounds=int(job.get("rounds", 5)), tolerance=task.tolerance,
                                       distributions=task.distributions, call_guard=_Guard)
    except correctness.CandidateFailure as exc:
        return {**base, **_failure_reply(exc.original, exc.stage, exc.traceback_text, getattr(module, "__file__", None)),
                "warnings": warnings}
    except Exception as exc:  # reference/task failures, or the candidate breaking torch itself
        tb = traceback.format_exc()
        if _oom(exc) or _cuda_fault(exc):
            return {**base, **_failure_reply(exc, "forward", tb, getattr(module, "__file__", None))}
        return {**base, "status": "runtime_error", "message": f"evaluation failed: {type(exc).__name__}: {exc}",
                "log": tb[-3000:]}

    findings = list(report.findings)
    for log in launch_logs:
        launch_findings = guards.check_launches(log, cand["language"], device)
        if launch_findings:
            findings += launch_findings
            break
    findings += thread_findings[:1]
    findings += guards.verify_trusted(snapshot)
    result: dict[str, Any] = {
        **base, "max_abs_err": report.max_abs_err, "max_rel_err": report.max_rel_err,
        "details": {"rounds": report.rounds, "error_map": report.error_map, "notes": report.notes + notes},
        "warnings": warnings + warn_flags,
    }
    status, flags, message = verdict(first_per_flag(findings))
    result["warnings"] += [f for f in flags if f not in result["warnings"] and not _rejects(f, findings)]
    if status:
        result.update(status=status, flags=[f for f in flags if _rejects(f, findings)], message=message)
        return result

    # 4. Work counting on the reference (FLOPs by torch's counter, minimal bytes).
    ref_model, cand_model = correctness.build_models(ref, cls, time_size, device, seed)
    pool = _prepare_inputs(ref, time_size, seed, device, 3)
    try:
        result["counted"] = count_work(ref_model, [x for x in pool[0]])
    except Exception as exc:  # counting is advisory
        result["counted"] = {"flops": None, "bytes": None, "error": str(exc)}

    if not job.get("time_it", True):
        result.update(status="ok", flags=[], message=message)
        return result

    # 5. Timing: candidate and reference interleaved; trusted identities re-checked first.
    pre = guards.verify_trusted(snapshot)
    if pre:
        s, f, m = verdict(pre)
        result.update(status="rejected", flags=f, message=m)
        return result
    # Only Triton code runs on the interpreter; a torch candidate on the CPU is compiled code on a wall clock.
    interpreted = INTERPRETER and cand["language"] == "triton"
    warm, reps = timing.default_reps(device, interpreted)
    warm, reps = job.get("warmup", warm), job.get("reps", reps)
    clock = "cuda-events" if device.startswith("cuda") else ("interpreter" if interpreted else "wall")
    fns = {"candidate": lambda xs: cand_model(*xs), "reference": lambda xs: ref_model(*xs)}
    if device.startswith("cuda") and job.get("compile_reference", True):
        compiled = _compiled(ref_model, pool[0], result["details"]["notes"])
        if compiled is not None:
            fns["compiled"] = compiled
    def refresh(k: int, inputs: list) -> None:
        # New values at the same addresses between reps: a result cached by pointer or content goes stale.
        fresh = ref.make_inputs(time_size, seed + 7001 + 31 * k + len(refreshed), device, "default")
        refreshed.append(k)
        for old, new in zip(inputs, fresh, strict=False):
            if isinstance(old, torch.Tensor):
                old.copy_(new)

    refreshed: list[int] = []
    try:
        timings, last = timing.measure(fns, pool, device=device, warmup=warm, reps=reps, clock=clock, refresh=refresh)
    except Exception as exc:
        return {**base, **_failure_reply(exc, "timing", traceback.format_exc(), getattr(module, "__file__", None))}
    # Result-cache check: the last timed output on every input set must be right for the inputs it was given.
    late = []
    for key in sorted(k for k in last if k.startswith("candidate#")):
        inputs, out = last[key]
        ref_out = correctness.reference64(ref_model, inputs, [])
        with torch.no_grad():
            ref_native = ref_model(*tensors.clone_inputs(inputs))
        if not compare.compare(out, ref_out, ref_native, task.tolerance).ok:
            late.append(Finding("result-cache", f"a timed call's output does not match its inputs (input set {key[-1]})"))
            break
    late += guards.verify_trusted(snapshot)
    if device.startswith("cuda"):
        late += guards.check_coverage(lambda: cand_model(*pool[0]), device, module, cand["source"])
    result["timing"] = timings["candidate"].to_dict()
    result["reference_timing"] = timings["reference"].to_dict()
    if clock == "interpreter":  # the reference is compiled PyTorch code, timed on the same wall clock
        result["reference_timing"]["clock"] = "wall"
    if "compiled" in timings:
        result["compiled_reference_timing"] = timings["compiled"].to_dict()
    if timings["candidate"].side_stream_runs:
        late.append(Finding("side-stream", f"{timings['candidate'].side_stream_runs} of {timings['candidate'].n} "
                                           "timed runs had work on another stream; timed to the device synchronize"))
    status, flags, message = verdict(first_per_flag(late))
    if status:
        result.update(status=status, flags=[f for f in flags if _rejects(f, late)], message=message)
        return result
    result["warnings"] += [f for f in flags if f not in result["warnings"]]
    result.update(status="ok", flags=[], message=message)
    if clock == "interpreter":
        result["details"]["notes"].append("interpreter timing: measures Triton's CPU interpreter, not hardware; no speedup is reported")
    return result


def _rejects(flag: str, findings: list[Finding]) -> bool:
    return any(f.flag == flag and f.severity == "reject" for f in findings)


def _compiled(ref_model: Any, inputs: list[Any], notes: list[str]):
    try:
        fn = torch.compile(ref_model)
        with torch.no_grad():
            fn(*inputs)
        return lambda xs: fn(*xs)
    except Exception as exc:
        notes.append(f"torch.compile of the reference failed ({type(exc).__name__}); compiled line omitted")
        return None


def main() -> None:
    # Long-lived objects (libraries, compiled kernels, earlier candidates' modules) move out of the collector's
    # reach: the correctness protocol collects garbage before every poisoning, and a full pass over torch and
    # triton's objects costs ~0.2 s each time.
    gc.freeze()
    # Start-up (imports) is done: the caller's per-evaluation deadline starts from here.
    _PROTOCOL.write(json.dumps({"ready": True, "pid": os.getpid(), "versions": _versions()}) + "\n")
    _PROTOCOL.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            reply = evaluate_job(job)
        except BaseException as exc:  # a reply must always come back
            reply = {"status": "runtime_error", "message": f"worker error: {type(exc).__name__}: {exc}",
                     "log": traceback.format_exc()[-3000:]}
            if _cuda_fault(exc):
                reply["restart_worker"] = True
        if torch.cuda.is_available():
            try:
                torch.cuda.synchronize()
            except Exception as exc:  # a sticky CUDA error: this process can no longer be trusted
                if reply.get("status") == "ok":
                    reply = {"status": "runtime_error", "message": f"CUDA fault after evaluation: {exc}"}
                reply["restart_worker"] = True
        _PROTOCOL.write(json.dumps(reply, default=_jsonable) + "\n")
        _PROTOCOL.flush()
        gc.collect()
        gc.freeze()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    if isinstance(obj, float):
        return obj
    return str(obj)


if __name__ == "__main__":
    main()
