"""Optional Nsight Compute pass: per-kernel DRAM bytes, duration and FP instruction counts beside the analytic
figures. Needs `ncu` on PATH (and permission to read GPU counters); everything degrades to a clear message."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from workbench.errors import WorkbenchError

METRICS = [
    "dram__bytes.sum", "gpu__time_duration.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum", "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum", "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
]
_UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3,
          "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
          "inst": 1, "": 1}


class NcuError(WorkbenchError):
    """ncu is missing or failed; the message says which and what to do."""


@dataclass
class KernelMetrics:
    name: str
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def dram_bytes(self) -> float | None:
        return self.metrics.get("dram__bytes.sum")

    @property
    def seconds(self) -> float | None:
        return self.metrics.get("gpu__time_duration.sum")

    @property
    def fp_ops(self) -> float:
        """FLOPs from SASS counts: add/mul count 1, fma 2 (per thread-level instruction)."""
        total = 0.0
        for k, v in self.metrics.items():
            if "_op_" in k:
                total += 2 * v if k.split("_op_")[1].startswith(("ffma", "hfma", "dfma")) else v
        return total


def available() -> bool:
    return shutil.which("ncu") is not None


def parse_csv(text: str) -> list[KernelMetrics]:
    """Parse `ncu --csv --page raw`-style or `--metrics ... --csv` long output (one row per kernel x metric)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels: dict[str, KernelMetrics] = {}
    for row in rows:
        kid = row.get("ID", "0")
        name = row.get("Kernel Name", "?")
        km = kernels.setdefault(kid, KernelMetrics(name))
        if "Metric Name" in row:
            unit = (row.get("Metric Unit") or "").strip().lower()
            value = (row.get("Metric Value") or "0").replace(",", "")
            try:
                km.metrics[row["Metric Name"]] = float(value) * _UNITS.get(unit, 1)
            except ValueError:
                continue
    return list(kernels.values())


def profile_script(args: list[str], kernel_regex: str | None = None, timeout: float = 600) -> list[KernelMetrics]:
    """Run `python args...` under ncu collecting METRICS; returns one entry per profiled kernel launch."""
    if not available():
        raise NcuError("Nsight Compute (ncu) is not on PATH: install NVIDIA Nsight Compute to get hardware counters")
    cmd = ["ncu", "--csv", "--metrics", ",".join(METRICS), "--clock-control", "none"]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    cmd += [sys.executable, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 and '"ID"' not in proc.stdout:
        raise NcuError(f"ncu failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")
    return parse_csv(proc.stdout)
