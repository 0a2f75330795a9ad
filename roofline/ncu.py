"""Optional Nsight Compute pass: per-kernel DRAM bytes, duration and FP instruction counts from hardware
counters, shown beside the analytic FLOPs/bytes. Needs `ncu` on PATH and permission to read GPU performance
counters; without them every entry point raises NcuError saying which is missing and what to do.

    kernels = ncu.profile_script(["bench.py"], kernel_regex="softmax")   # a script run under ncu
    kernels = ncu.profile_function("mypkg.bench:run")                     # a module-level function
    ncu.summarize(kernels)                                                # totals: seconds, dram bytes, flops
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import WorkbenchError

#: Always requested: memory traffic, kernel duration, and per-thread FP instruction counts (add/mul/fma).
CORE_METRICS = [
    "dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
    *[f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
      for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")],
]
#: Tensor-pipe activity. Names differ between architectures (gmma is Hopper+); unknown ones are dropped and
#: the profile is retried without them.
TENSOR_METRICS = [
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
]
METRICS = CORE_METRICS + TENSOR_METRICS

_UNITS = {
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1 << 10, "mibyte": 1 << 20, "gibyte": 1 << 30,
    "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0,
    "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
}
_FMA = ("ffma", "hfma", "dfma")
_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC"}


class NcuError(WorkbenchError):
    """ncu is missing, not permitted, or failed; the message says which and what to do."""


@dataclass
class KernelMetrics:
    """One profiled kernel launch: its name and metric values in base units (bytes, seconds, instructions)."""

    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    launch_id: str = ""

    @property
    def dram_bytes(self) -> float | None:
        if "dram__bytes.sum" in self.metrics:
            return self.metrics["dram__bytes.sum"]
        parts = [self.metrics.get(k) for k in ("dram__bytes_read.sum", "dram__bytes_write.sum")]
        return sum(parts) if all(p is not None for p in parts) else None

    @property
    def seconds(self) -> float | None:
        return self.metrics.get("gpu__time_duration.sum")

    @property
    def fp_ops(self) -> float:
        """FLOPs on the FP pipes from SASS thread-instruction counts: add and mul count 1, fma 2. Tensor-core
        math is not in these counters (see the tensor metrics)."""
        total = 0.0
        for key, value in self.metrics.items():
            if key.startswith("sm__sass_thread_inst_executed_op_"):
                op = key.removeprefix("sm__sass_thread_inst_executed_op_").split("_")[0]
                total += 2 * value if op in _FMA else value
        return total


def available() -> bool:
    return shutil.which("ncu") is not None


def _number(text: str, unit: str) -> float | None:
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value * _UNITS.get(unit.strip().lower(), 1)


def _csv_block(text: str) -> list[str]:
    """The CSV part of ncu's output: from the header line on (the profiled program prints before it)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"'):
            return [ln for ln in lines[i:] if ln.startswith('"')]
    return []


def parse_csv(text: str) -> list[KernelMetrics]:
    """Kernels from `ncu --csv` output, in launch order. Reads both layouts: the default one (a row per kernel x
    metric: "Metric Name", "Metric Unit", "Metric Value") and `--page raw` (a column per metric, a unit row
    under the header). Unit-scaled to bytes and seconds; thousands separators and "n/a" handled."""
    lines = _csv_block(text)
    if not lines:
        return []
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = next(reader)
    rows = list(reader)
    kernels: dict[str, KernelMetrics] = {}
    if "Metric Name" in header:
        col = {name: i for i, name in enumerate(header)}
        for row in rows:
            if len(row) < len(header):
                continue
            kid = row[col["ID"]]
            km = kernels.setdefault(kid, KernelMetrics(row[col.get("Kernel Name", 0)], launch_id=kid))
            value = _number(row[col["Metric Value"]], row[col["Metric Unit"]] if "Metric Unit" in col else "")
            if value is not None:
                km.metrics[row[col["Metric Name"]]] = value
        return list(kernels.values())
    # --page raw: the first data row holds units when its ID cell is empty.
    units = [""] * len(header)
    if rows and rows[0] and rows[0][0] == "":
        units, rows = rows[0], rows[1:]
    for row in rows:
        if len(row) < len(header):
            continue
        cells = dict(zip(header, row, strict=False))
        km = KernelMetrics(cells.get("Kernel Name", "?"), launch_id=cells.get("ID", ""))
        for i, name in enumerate(header):
            if name in _ID_COLUMNS:
                continue
            value = _number(row[i], units[i] if i < len(units) else "")
            if value is not None:
                km.metrics[name] = value
        kernels[km.launch_id or str(len(kernels))] = km
    return list(kernels.values())


def summarize(kernels: list[KernelMetrics]) -> dict[str, Any]:
    """Totals over launches: {"launches", "seconds", "dram_bytes", "fp_ops", "kernels": {name: launches}}."""
    names: dict[str, int] = {}
    for k in kernels:
        names[k.name] = names.get(k.name, 0) + 1
    return {"launches": len(kernels), "seconds": sum(k.seconds or 0.0 for k in kernels),
            "dram_bytes": sum(k.dram_bytes or 0.0 for k in kernels), "fp_ops": sum(k.fp_ops for k in kernels),
            "kernels": names}


def _unknown_metrics(output: str, requested: list[str]) -> list[str]:
    """Metrics an ncu error names as unknown/unsupported (so the run can be retried without them)."""
    if not re.search(r"(?i)(failed to find metric|unknown metric|not supported|invalid metric)", output):
        return []
    return [m for m in requested if m in output or m.split(".")[0] in output]


def run_ncu(command: list[str], metrics: list[str] | None = None, kernel_regex: str | None = None,
            launch_skip: int = 0, launch_count: int | None = None, timeout: float = 600,
            extra_args: list[str] | None = None) -> list[KernelMetrics]:
    """Profile `command` (argv) under ncu and parse the result. Clocks are left as the GPU sets them
    (`--clock-control none`, like the workbench's own timing); caches are flushed between replays (ncu's
    default). Unknown metrics are dropped and the run retried once per drop."""
    if not available():
        raise NcuError("Nsight Compute (ncu) is not on PATH: install NVIDIA Nsight Compute (it ships with the CUDA "
                       "toolkit) and put its directory on PATH to get hardware counters")
    wanted = list(metrics or METRICS)
    for _ in range(4):
        cmd = ["ncu", "--csv", "--clock-control", "none", "--metrics", ",".join(wanted)]
        if kernel_regex:
            cmd += ["--kernel-name", f"regex:{kernel_regex}"]
        if launch_skip:
            cmd += ["--launch-skip", str(launch_skip)]
        if launch_count:
            cmd += ["--launch-count", str(launch_count)]
        cmd += [*(extra_args or []), *command]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise NcuError(f"ncu did not finish within {timeout:.0f} s; profile fewer launches "
                           "(launch_count) or a smaller problem") from exc
        output = proc.stdout + "\n" + proc.stderr
        kernels = parse_csv(proc.stdout)
        if kernels:
            return kernels
        if "ERR_NVGPUCTRPERM" in output:
            raise NcuError("ncu may not read GPU performance counters here (ERR_NVGPUCTRPERM): run as root or "
                           "set the driver option NVreg_RestrictProfilingToAdminUsers=0")
        dropped = [m for m in _unknown_metrics(output, wanted) if m not in CORE_METRICS[:4]]
        if dropped:
            wanted = [m for m in wanted if m not in dropped]
            continue
        if proc.returncode != 0:
            raise NcuError(f"ncu failed (exit {proc.returncode}): {output.strip()[-1200:]}")
        raise NcuError("ncu profiled no kernel: check kernel_regex and that the program launches GPU kernels "
                       f"(output tail: {output.strip()[-400:]})")
    raise NcuError(f"ncu rejected the metrics even after dropping unknown ones; last tried: {', '.join(wanted)}")


def profile_script(args: list[str], kernel_regex: str | None = None, timeout: float = 600,
                   **kwargs: Any) -> list[KernelMetrics]:
    """Run `python args...` (a script and its arguments) under ncu; one entry per profiled kernel launch."""
    return run_ncu([sys.executable, *args], kernel_regex=kernel_regex, timeout=timeout, **kwargs)


def profile_function(target: str, args: list[str] | None = None, kernel_regex: str | None = None,
                     timeout: float = 600, **kwargs: Any) -> list[KernelMetrics]:
    """Profile a module-level function given as "package.module:function" (called with string `args`) in a
    fresh Python process under ncu. A function object cannot be handed to ncu, which profiles processes."""
    module, _, func = target.partition(":")
    if not module or not func:
        raise NcuError(f"profile_function needs 'module:function', got {target!r}")
    code = (f"import sys, importlib; fn = getattr(importlib.import_module({module!r}), {func!r}); "
            "fn(*sys.argv[1:]); import torch; torch.cuda.synchronize()")
    return run_ncu([sys.executable, "-c", code, *(args or [])], kernel_regex=kernel_regex, timeout=timeout, **kwargs)
