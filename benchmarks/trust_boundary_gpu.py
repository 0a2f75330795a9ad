"""On a GPU machine: does the sandboxed runner see the GPU, which shared-memory transport reaches it, and do the
built-in solutions and a few cheats get the verdicts they get on the CPU?

    python benchmarks/trust_boundary_gpu.py

Prints the sandbox the fork server could make, the transport the judge chose (CUDA IPC with a private or a shared
IPC namespace, or host staging, with the reason), and one line per evaluation: status, flags, time, speedup with
its CI and verdict, coverage, sandbox and transport.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import workbench as wb  # noqa: E402
from workbench.sandbox import namespaces as sandbox  # noqa: E402

CHEATS = ROOT / "tests" / "cheats"


def line(res: wb.Result, seconds: float) -> str:
    t = f"{res.timing.median_ms:.4f} ms" if res.timing else "-"
    sp = f"{res.speedup:.2f}x" if res.speedup else "-"
    ci = f"[{res.speedup_ci[0]:.2f},{res.speedup_ci[1]:.2f}] {res.speedup_verdict}" if res.speedup_ci else ""
    cov = f"cov {res.coverage:.2f}" if res.coverage is not None else ""
    return (f"{res.task:14s} {res.candidate_name:28s} {res.status:13s} {','.join(res.flags):24s} {t:>12s} {sp:>7s} "
            f"{ci:24s} {cov:9s} sandbox={res.sandbox} transport={res.protocol.get('transport')} "
            f"ipc={res.protocol.get('ipc_namespace')} stop={res.timing.stop_reason if res.timing else ''} "
            f"{seconds:.1f}s")


def main() -> None:
    print("sandbox probe:", sandbox.probe())
    rows = [(wb.get_task(name), wb.get_task(name).solution_candidate()) for name in ("softmax", "layernorm", "matmul")]
    softmax = wb.get_task("softmax")
    for cheat in ("stale_memory.py", "side_stream.py", "warm_cache.py", "torch_forward.py"):
        rows.append((softmax if cheat != "stale_memory.py" else softmax,
                     wb.Candidate.from_file(CHEATS / cheat)))
    for task, cand in rows:
        t0 = time.perf_counter()
        res = wb.evaluate(task, cand, device="cuda")
        print(line(res, time.perf_counter() - t0), flush=True)
        print("    stages:", res.stage_seconds, "n:", res.timing.n if res.timing else None,
              "batches:", res.protocol.get("timed_batches"), "checked:", res.protocol.get("checked_timed_calls"),
              flush=True)
        print("    clock:", res.protocol.get("clock_check"), "basis:", res.protocol.get("timing_basis"),
              "harness:", res.protocol.get("harness"), flush=True)
        print("    phases:", res.protocol.get("timing_phases"), "ref:",
              res.reference_timing.median_ms if res.reference_timing else None, "judge clock:",
              res.judge_clock_timing.median_ms if res.judge_clock_timing else None, flush=True)
        if res.status not in ("ok", "rejected", "incorrect"):
            print("   ", res.message[:1500].replace("\n", "\n    "), flush=True)
        if res.protocol.get("transport_note"):
            print("    transport note:", res.protocol["transport_note"][:800], flush=True)


if __name__ == "__main__":
    main()
