"""Shared pieces of the red-team suite: a small task, an honest kernel to hide attacks in, and helpers that look
for harm outside the evaluation (files, processes, secrets)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workbench as wb
from workbench.sandbox import namespaces as sandbox

HONEST = (Path(__file__).resolve().parents[1] / "faults" / "honest_softmax.py").read_text()


def softmax_task() -> wb.Task:
    from engine_tasks import softmax_task as make

    return make()


def kernel(at_import: str = "", in_forward: str = "", result: str = "y") -> wb.Candidate:
    """The honest softmax kernel with attack code run at import and/or in forward (before returning `result`)."""
    src = HONEST.replace("\nclass ModelNew", f"\n{at_import}\n\nclass ModelNew", 1) if at_import else HONEST
    body = "".join(f"        {line}\n" for line in in_forward.strip("\n").splitlines()) if in_forward else ""
    src = src.replace("        return y\n", body + f"        return {result}\n")
    return wb.Candidate(source=src, language="triton")


def evaluate(cand: wb.Candidate, task: wb.Task | None = None, **kw) -> wb.Result:
    kw.setdefault("time_it", False)
    return wb.evaluate(task or softmax_task(), cand, device="cpu", **kw)


def processes_with(marker: str) -> list[int]:
    """PIDs of live processes whose command line contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


needs_sandbox = pytest.mark.skipif(sandbox.probe().kind != "namespaces",
                                   reason=f"no sandbox on this machine: {sandbox.probe().reason}")
