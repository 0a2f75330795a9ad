"""Named check outcomes: every failed check has a flag (stored, counted by studies), a severity and a fix. `FLAGS` is
the single catalog that check code, messages and docs use."""

from __future__ import annotations

from dataclasses import dataclass

REJECT, WARN = "reject", "warn"


@dataclass(frozen=True)
class FlagInfo:
    name: str
    severity: str  # REJECT: the result cannot be ok; WARN: shown, result may still be ok
    why: str
    fix: str
    #: Status a reject-severity flag implies: "incorrect" for wrong numbers, "rejected" for cheats.
    status: str = "rejected"


@dataclass
class Finding:
    """One failed check: which flag, and what exactly was seen (line numbers, values)."""

    flag: str
    detail: str = ""

    @property
    def info(self) -> FlagInfo:
        return FLAGS.get(self.flag) or FlagInfo(self.flag, REJECT, self.detail, "see the message")

    @property
    def severity(self) -> str:
        return self.info.severity

    def line(self) -> str:
        info = self.info
        detail = f" ({self.detail})" if self.detail else ""
        return f"[{self.flag}] {info.why}{detail}. Fix: {info.fix}"


_FLAG_LIST = [
    # correctness protocol (docs/anti-cheating.md, cheats 1, 2, 3, 11, 12 and type checks)
    FlagInfo("mismatch", REJECT, "output differs from the float64 reference beyond tolerance",
             "compare your indexing, masks and accumulation dtype with the reference", "incorrect"),
    FlagInfo("non-finite", REJECT, "output contains NaN or Inf where the reference is finite",
             "check masked loads (`other=`), divisions and exp overflow", "incorrect"),
    FlagInfo("wrong-shape", REJECT, "output shape differs from the reference's",
             "allocate the output with the reference's shape", "incorrect"),
    FlagInfo("wrong-dtype", REJECT, "output dtype differs from the reference's (silent precision change)",
             "return the reference's dtype; accumulate in fp32 but store in the output dtype", "incorrect"),
    FlagInfo("wrong-device", REJECT, "output is on a different device than the reference's",
             "allocate outputs on the inputs' device", "incorrect"),
    FlagInfo("wrong-type", REJECT, "output is not exactly torch.Tensor (subclass, tuple or other object)",
             "return a plain torch.Tensor like the reference does", "incorrect"),
    FlagInfo("lazy-output", REJECT, "output is a tensor subclass or not materialized (computes on access)",
             "return a plain, materialized torch.Tensor"),
    FlagInfo("unwritten-output", REJECT, "some output elements were never written (poisoned values survived)",
             "make sure the grid and masks cover every output element", "incorrect"),
    FlagInfo("stale-memory", REJECT, "output depends on leftover memory (e.g. the reference's freed result)",
             "write every output element; never rely on the contents of torch.empty"),
    FlagInfo("nondeterministic", REJECT, "two runs on the same inputs disagree beyond tolerance",
             "look for races: missing barriers, overlapping writes, reads of unwritten memory", "incorrect"),
    FlagInfo("input-mutation", REJECT, "the candidate modified its inputs",
             "write results to a new output tensor; never write to inputs"),
    FlagInfo("degenerate-output", REJECT, "output is zero or constant while the reference's is not",
             "compute the real result; a constant that passes a loose tolerance is not a kernel"),
    FlagInfo("weak-task", WARN, "the task's reference output is near-constant or ignores an input",
             "the task cannot tell right from wrong well: change its sizes, inputs or tolerances"),
    FlagInfo("interpreter-bf16", WARN, "bf16 arithmetic is broken in Triton's interpreter; ran in fp32 on CPU",
             "run on a GPU for a bf16 verdict"),
    # static (AST) checks, issue 3
    FlagInfo("no-custom-kernel", REJECT, "no @triton.jit or __global__ kernel is defined",
             "write the computation as a Triton or CUDA kernel"),
    FlagInfo("torch-compute-in-forward", REJECT, "torch compute ops do the work in forward",
             "move the computation into your kernel; torch may only allocate and reshape"),
    FlagInfo("try-fallback", REJECT, "try/except around the kernel can fall back to PyTorch",
             "remove the fallback; a failing kernel must fail"),
    FlagInfo("reference-subclass", REJECT, "ModelNew subclasses, builds or calls the reference Model (beside a "
             "ModelNew, a class named Model is the reference in KernelBench's format), or imports the reference module",
             "implement ModelNew from nn.Module directly; a candidate whose only class is named Model is fine"),
    FlagInfo("module-cache", REJECT, "a module-level or instance container keyed on the inputs' address or "
             "content is used as a result cache",
             "compute results on every call; cache only compiled kernels or configs"),
    FlagInfo("stream-use", WARN, "the candidate creates or switches CUDA streams",
             "launch on the current stream; side-stream work is timed at its true cost anyway"),
    FlagInfo("thread-use", REJECT, "the candidate starts threads or processes",
             "do the work synchronously in forward"),
    FlagInfo("harness-tamper", REJECT, "the candidate reaches into the harness or the interpreter: trace/profile "
             "hooks, stack frames, the garbage collector's object graph, code-object swaps, or workbench modules",
             "remove it: a kernel needs none of these (and the judge runs in another process)"),
    FlagInfo("foreign-compute", WARN, "the candidate imports a library that computes outside its kernels (numpy, "
             "ctypes, cffi, subprocess, ...) or converts tensors to numpy in forward",
             "compute in your kernel; work done elsewhere and copied in is not the kernel's (GPU coverage checks it)"),
    # runtime anti-cheating checks, issue 3
    FlagInfo("decoy-kernel", REJECT, "the candidate's own kernels were not launched or did not produce the output",
             "launch your kernel in forward and return its output"),
    FlagInfo("low-coverage", REJECT, "the candidate's own kernels account for too little of the GPU time",
             "do the work in your kernel rather than in library calls"),
    FlagInfo("thread-deferral", REJECT, "forward left threads running (work deferred past the timer)",
             "do the work synchronously in forward"),
    FlagInfo("timer-patch", REJECT, "timing or checking functions were replaced by the candidate",
             "do not patch torch, time or workbench functions"),
    FlagInfo("result-cache", REJECT, "outputs were reused across calls instead of recomputed",
             "compute on every call; do not key results on input pointers or contents"),
    FlagInfo("side-stream", WARN, "work ran on a non-default stream; timed at its true (synchronized) cost",
             "launch on the current stream"),
    # trust boundary, issue 10
    FlagInfo("protocol-violation", REJECT, "the candidate's runner sent something that is not the judge/runner "
             "protocol (a forged, replayed or malformed message)",
             "do not write to the runner's channel; return outputs from forward"),
    FlagInfo("host-compute", REJECT, "the forward's time is spent on the host (numpy, another library), not in GPU "
             "kernels", "compute in your kernels; copy nothing in from the host"),
    FlagInfo("faster-than-physics", REJECT, "measured time is below the roofline floor for this device",
             "the measurement or the kernel is wrong: a kernel cannot beat bytes/bandwidth or FLOPs/peak"),
    # evidence the runner made (issue 22)
    FlagInfo("unverified-evidence", REJECT, "the verdict would rest on launch evidence only the candidate's runner "
             "made, and what the judge measured does not corroborate it",
             "launch your own kernels in forward and leave the runner alone; on a GPU, let the profiler see them"),
]

FLAGS: dict[str, FlagInfo] = {f.name: f for f in _FLAG_LIST}


def flag_table_markdown() -> str:
    """The severity table (used in docs and `kwb flags`)."""
    rows = ["| flag | severity | why | fix |", "|---|---|---|---|"]
    rows += [f"| `{f.name}` | {f.severity} | {f.why} | {f.fix} |" for f in _FLAG_LIST]
    return "\n".join(rows)


def first_per_flag(findings: list[Finding]) -> list[Finding]:
    """The first finding of each flag, in order: one message line per failed check."""
    first: dict[str, Finding] = {}
    for f in findings:
        first.setdefault(f.flag, f)
    return list(first.values())
