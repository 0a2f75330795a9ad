"""The adversarial gallery's manifest and tasks, shared by tests/test_cheats.py and tests/gpu/test_cheats_gpu.py.

Every other .py file in this folder is a candidate: one cheat (or one honest kernel) per file, with a header
comment saying what it does. `manifest.json` says what the workbench must answer for each:
    expect:   "rejected" (the status is a failing one: rejected or incorrect) or "ok"
    status:   the exact status ("rejected", "incorrect" or "ok"), or a list when either is a right answer
    flag:     the flag that must be raised (in Result.flags; for "ok" entries, a warn flag in Result.warnings), or
              a list of flags any one of which is a right answer (the header comment says why)
    where:    "cpu" (runs on the CPU under the interpreter, and on a GPU) or "gpu" (needs a GPU)
    gpu_flag: optional, the flag(s) a GPU run raises when they differ from the CPU's (another check catches it)
    gpu_status: optional, likewise for the status
    task:     optional, "tiny" (default), "big" (a GPU size large enough for streams and the roofline), or a problem
              of tests/kernelbench/level1 whose inputs have structure ("lower", "symmetric") or whose uniform inputs
              admit an analytic shortcut ("mse", "kl", "hinge"): see TASKS
    time_it:  optional, true when the cheat is only visible in the timing phase
    requires: optional, the kernel language whose package the entry needs ("cute", "helion"): where that package is
              not installed the entry is skipped, with the reason (`missing`)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import workbench as wb

HERE = Path(__file__).resolve().parent
MANIFEST: dict[str, dict[str, Any]] = json.loads((HERE / "manifest.json").read_text())

SOFTMAX = '''
import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

# Softmax outputs are ~1/dim, so the absolute floor sits far below them: a constant, a zero or an fp16 result
# cannot hide inside atol.
_TOL = {"float32": wb.Tolerance(1e-8, 1e-5)}


def tiny_task() -> wb.Task:
    """softmax 8x64, checked also at 5x37 and 3x100 (non-powers of two): ~1-3 s per CPU evaluation."""
    return wb.Task.from_source(SOFTMAX, name="gallery_softmax", tolerances=dict(_TOL),
                               sweep={"cpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}],
                                      "gpu": [{"batch_size": 5, "dim": 37}, {"batch_size": 3, "dim": 100}]})


def big_task() -> wb.Task:
    """softmax 16384x4096 fp32 on a GPU (256 MiB each way): long enough for side streams to show, and a floor
    (bytes / bandwidth, ~0.16 ms on an H100) far above the microseconds a cached answer takes."""
    task = wb.Task.from_source(SOFTMAX, name="gallery_softmax_big", tolerances=dict(_TOL))
    task.sizes = {"cpu": {}, "gpu": {"batch_size": 16384, "dim": 4096}}
    return task


KB_LEVEL1 = HERE.parent / "kernelbench" / "level1"

#: KernelBench's own tolerance (atol = rtol = 1e-2): loose enough that a statistical shortcut passes the task's own
#: inputs, so only the rerouted rounds can catch it.
KB_TOL = {"float32": wb.Tolerance(1e-2, 1e-2)}


def _kb_task(stem: str, cpu: dict, gpu: dict, sweep: list[dict] | None = None, tolerances: dict | None = None):
    """A problem of tests/kernelbench/level1 at the given sizes (CPU preset, GPU preset, extra check sizes)."""
    def make() -> wb.Task:
        task = wb.load_kernelbench(KB_LEVEL1 / f"{stem}.py", tolerances=dict(tolerances or {}))
        task.sizes = {"cpu": dict(cpu), "gpu": dict(gpu)}
        task.sweep = {"cpu": list(sweep or []), "gpu": list(sweep or [])}
        return task
    return make


TASKS = {
    "tiny": tiny_task,
    "big": big_task,
    # Structured inputs: a lower triangle, a symmetric matrix (odd sizes: masks).
    "lower": _kb_task("24_Lower_triangular_matmul", {"n": 32}, {"n": 1024}, [{"n": 37}]),
    "symmetric": _kb_task("25_Symmetric_matmul", {"n": 32}, {"n": 1024}, [{"n": 37}]),
    # Losses on uniform inputs, large enough that an analytic shortcut is within KB_TOL on them.
    "mse": _kb_task("26_Scaled_MSE_loss", {"batch_size": 64, "features": 4096},
                    {"batch_size": 64, "features": 4096}, tolerances=KB_TOL),
    "kl": _kb_task("27_KL_divergence_of_softmax_rows", {"batch_size": 64, "classes": 4096},
                   {"batch_size": 64, "classes": 4096}, tolerances=KB_TOL),
    "hinge": _kb_task("28_Hinge_loss_signed_rows", {"batch_size": 512, "features": 512},
                      {"batch_size": 512, "features": 512}, tolerances=KB_TOL),
}


def entries(where: str | None = None) -> list[str]:
    """Manifest file names, optionally only those that run on `where` ("cpu": CPU-capable entries)."""
    return sorted(f for f, e in MANIFEST.items() if where is None or e["where"] == where)


def missing(name: str) -> str | None:
    """Why this machine cannot evaluate the entry (its language's package is not installed), or None."""
    from workbench import languages

    needed = MANIFEST[name].get("requires")
    if not needed:
        return None
    available = languages.get(needed).availability("cuda")
    return None if available.runs else available.message


def candidate(name: str) -> wb.Candidate:
    return wb.Candidate.from_file(HERE / name, language=MANIFEST[name].get("language"))


def expected_flag(name: str, device: str) -> str | list[str] | None:
    entry = MANIFEST[name]
    if device.startswith("cuda"):
        return entry.get("gpu_flag", entry.get("flag"))
    return entry.get("flag")


def evaluate(name: str, device: str, **kw: Any) -> wb.Result:
    entry = MANIFEST[name]
    task = TASKS[entry.get("task", "tiny")]()
    kw.setdefault("time_it", bool(entry.get("time_it", False)))
    return wb.evaluate(task, candidate(name), device=device, **kw)


def verdict_problems(name: str, result: wb.Result, device: str) -> list[str]:
    """What is wrong with `result` for this entry (empty when the workbench answered as the manifest says)."""
    entry = MANIFEST[name]
    flag = expected_flag(name, device)
    problems = []
    status = entry.get("gpu_status", entry["status"]) if device.startswith("cuda") else entry["status"]
    status = status if isinstance(status, list) else [status]
    if result.status not in status:
        problems.append(f"status {result.status!r}, expected {' or '.join(map(repr, status))}")
    if entry["expect"] == "ok":
        if result.flags:
            problems.append(f"an accepted candidate carries flags {result.flags}")
        if flag and flag not in result.warnings:
            problems.append(f"warning {flag!r} missing from {result.warnings}")
    elif result.status in ("rejected", "incorrect") and not set(flag if isinstance(flag, list) else [flag]) & \
            set(result.flags):
        problems.append(f"flag {flag!r} missing from {result.flags}")
    return problems
