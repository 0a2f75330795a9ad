"""Where a study's numbers came from: versions, devices, clocks, sandbox, policies and the git commit.

A report travels without its store, so it carries what a reader needs to judge or reproduce it: which
software measured what on which device with which clock, whether candidates ran sandboxed, under which
precision and kernel policy, and the commit of the study's source when it lives in a git checkout.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from widgets.report_data import missing, records, text
from workbench.result import kernel_policy_text


def git_commit(directory: str | Path | None) -> str | None:
    """"abc1234 (dirty)" for the checkout holding `directory`, None outside git or without git."""
    if not directory or not Path(directory).is_dir():
        return None
    try:
        head = subprocess.run(["git", "-C", str(directory), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def _distinct(values) -> list[str]:
    return sorted({text(v) for v in values if not missing(v)})


def _telemetry(results: list[Any]) -> list[str]:
    """SM clock and throttle observations from the results' telemetry (GPU runs with NVML)."""
    out = []
    for res in results:
        tel = getattr(res, "telemetry", None) or {}
        if not tel:
            continue
        parts = [f"{k}={v}" for k, v in sorted(tel.items()) if isinstance(v, (int, float, str)) and k != "samples"]
        if parts:
            out.append(f"{res.candidate_name}: " + ", ".join(parts[:6]))
    return out[:8]


def provenance(frame, run: dict[str, Any] | None, results: list[Any] = (), store_path: str = "") -> list[tuple[str, str]]:
    """(label, value) rows; a value that is unknown is left out rather than shown empty."""
    rows = records(frame)
    out: list[tuple[str, str]] = []
    versions: dict[str, set[str]] = {}
    for r in rows:
        for k, v in (r.get("versions") or {}).items():
            versions.setdefault(k, set()).add(str(v))
    if versions:
        out.append(("versions", ", ".join(f"{k} {' / '.join(sorted(v))}" for k, v in sorted(versions.items()))))
    import workbench

    commit = git_commit(Path(workbench.__file__).parent)
    out.append(("kernel-workbench", workbench.__version__ + (f" (git {commit})" if commit else "")))
    devices = _distinct(f"{r.get('device')}: {r.get('device_name')}" if r.get("device_name") else r.get("device")
                        for r in rows)
    if devices:
        out.append(("devices", "; ".join(devices)))
    clocks = _distinct(r.get("clock") for r in rows)
    if clocks:
        note = " (interpreter times show correctness and relative cost only)" if "interpreter" in clocks else ""
        out.append(("timing clocks", ", ".join(clocks) + note))
    stops = _distinct(r.get("stop_reason") for r in rows)
    if stops:
        out.append(("timing stopped by", ", ".join(stops)))
    tele = _telemetry(results)
    if tele:
        out.append(("GPU clocks (NVML)", "; ".join(tele)))
    sandboxes = _distinct(r.get("sandbox") for r in rows)
    out.append(("sandbox", ", ".join(sandboxes) if sandboxes else "not recorded (results from before sandboxing)"))
    for key, label in (("precision", "precision policy"), ("kernel_policy", "kernel policy"),
                       ("speedup_basis", "speedup basis")):
        found = _distinct(kernel_policy_text(v) if key == "kernel_policy" and isinstance(v, str) else v
                          for v in (r.get(key) for r in rows))
        if found:
            out.append((label, ", ".join(found)))
    if run:
        out.append(("notebook", text(run.get("notebook"))))
        if run.get("started"):
            out.append(("started", text(run.get("started"))))
        commit = git_commit(Path(text(run.get("notebook"))).parent) if run.get("notebook") else None
        if commit:
            out.append(("study git commit", commit))
    stamps = _distinct(r.get("timestamp") for r in rows)
    if stamps:
        out.append(("results timestamped", stamps[0] if len(stamps) == 1 else f"{stamps[0]} to {stamps[-1]}"))
    if store_path:
        out.append(("store", str(Path(store_path).resolve())))
    return out
