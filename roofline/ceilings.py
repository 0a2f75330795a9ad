"""Measured ceilings: copy bandwidth (bytes read + written) and matmul rate per dtype, cached per device.

Datasheet peaks are boost-clock numbers that real code rarely reaches, so the roofline also shows what this
machine actually does: a large device-to-device copy (a memory roof every kernel can be compared with) and a
large torch matmul per dtype (cuBLAS on a GPU, the CPU BLAS otherwise), median of several timed runs. Measured
once per device + driver + torch/triton versions and cached as JSON under $KWB_CACHE_DIR/ceilings (default
~/.cache/kernel-workbench/ceilings), because a measurement takes seconds and allocates gigabytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.dtypes import dtype_key

#: Bumped when the measurement changes, so old cache files are not reused.
SCHEMA = 2
#: Matmul dtypes measured per device kind (keys of roofline.specs peaks).
GPU_MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16")
CPU_MATMUL_DTYPES = ("fp32", "fp64")


@dataclass
class Ceilings:
    """What this device measurably does: bytes/s of a large copy (read + write) and FLOP/s of a large matmul."""

    device_name: str
    copy_bandwidth: float
    matmul_flops: dict[str, float] = field(default_factory=dict)
    key: str = ""
    measured_at: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)

    def peak(self, dtype: object) -> float:
        """Measured matmul rate for `dtype` ("float16", "fp16", ...); fp32's when that dtype was not measured."""
        key = dtype_key(dtype)
        return self.matmul_flops.get(key) or self.matmul_flops.get("fp32") or max(self.matmul_flops.values(), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# ---- identity of a device + software stack ------------------------------------------------------------

def cache_dir() -> Path:
    root = os.environ.get("KWB_CACHE_DIR") or str(Path.home() / ".cache" / "kernel-workbench")
    return Path(root) / "ceilings"


def _normalize(device: str | None) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return m.group(1) if m else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def last_level_cache_bytes(default: int = 32 << 20) -> int:
    """Size of the CPU's largest cache (Linux sysfs), `default` where it cannot be read. A working set smaller
    than this may never reach DRAM on a CPU, which has no cache flush between timed runs."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.fullmatch(r"(\d+)([KMG]?)", path.read_text().strip())
        if m:
            sizes.append(int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])
    return max(sizes) if sizes else default


#: Cache sizes assumed where sysfs does not give them: generous, since a bigger level puts more working sets under a
#: faster roof (a lower floor), never a stricter one.
DEFAULT_CPU_CACHES = ((1, 64 << 10), (2, 4 << 20), (3, 256 << 20))


def cpu_cache_levels() -> list[tuple[int, int]]:
    """(level, bytes) of the CPU's data caches, smallest first (Linux sysfs; `DEFAULT_CPU_CACHES` elsewhere)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes: dict[int, int] = {}
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            m = re.fullmatch(r"(\d+)([KMG]?)", (index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if m:
            sizes[level] = max(sizes.get(level, 0), int(m.group(1)) * units[m.group(2)])
    return sorted(sizes.items()) or list(DEFAULT_CPU_CACHES)


def cpu_max_clock_hz() -> float:
    """The highest clock the kernel reports for any core (sysfs cpufreq), 0 where it does not say."""
    best = 0.0
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            best = max(best, float(path.read_text()) * 1e3)
        except (OSError, ValueError):
            continue
    return best


def device_identity(device: str | None = None) -> dict[str, str]:
    """Name, driver and library versions of `device`: what the cached ceilings are keyed by."""
    import torch

    device = _normalize(device)
    try:
        import triton

        triton_version = triton.__version__
    except Exception:  # noqa: BLE001 - triton is optional for ceilings
        triton_version = "none"
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        driver = _nvidia_driver() or f"runtime {torch.version.hip or torch.version.cuda}"
    else:
        name = f"cpu: {_cpu_model()} ({torch.get_num_threads()} threads)"
        driver = platform.platform()
    return {"name": name, "driver": driver, "torch": torch.__version__, "triton": triton_version,
            "kind": "cuda" if device.startswith("cuda") else "cpu", "schema": str(SCHEMA)}


def device_key(device: str | None = None) -> tuple[str, str]:
    """(device name, short hash of name + driver + versions)."""
    ident = device_identity(device)
    raw = "|".join(ident[k] for k in ("schema", "kind", "name", "driver", "torch", "triton"))
    return ident["name"], hashlib.sha256(raw.encode()).hexdigest()[:16]


# ---- measurement ------------------------------------------------------------------------------------

def time_call(fn: Callable[[], Any], device: str, reps: int, warmup: int = 2) -> list[float]:
    """Seconds of each of `reps` calls of fn: CUDA events around each call on a GPU, wall clock otherwise.

    On a GPU all calls are queued back to back behind the warm-up and synchronized once at the end, so the GPU
    never idles between an event and the kernel it brackets (a synchronize per call would add the next
    launch's latency to every sample); the operations timed here take milliseconds, far longer than a launch.
    """
    import torch

    gpu = device.startswith("cuda")
    for _ in range(warmup):
        fn()
    if gpu:
        with torch.cuda.device(torch.device(device)):  # events on the measured device's stream, not cuda:0's
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for start, end in events:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in events]
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def default_copy_bytes(device: str) -> int:
    """Bytes per buffer of the copy: 1 GiB on a GPU (bounded by free memory), 4x the last-level cache on a CPU
    (so the copy streams from DRAM), within 64-256 MiB to stay under a second."""
    import torch

    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(min(1 << 30, free // 4)) & ~0xFFFF
    return int(min(max(4 * last_level_cache_bytes(), 64 << 20), 256 << 20))


def measure_copy(device: str, nbytes: int | None = None, reps: int | None = None) -> tuple[float, dict[str, Any]]:
    """(bytes/s, details) of dst.copy_(src) on `nbytes`-byte buffers, counting the bytes read plus written."""
    import torch

    gpu = device.startswith("cuda")
    nbytes = nbytes or default_copy_bytes(device)
    reps = reps or (30 if gpu else 5)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)  # contents do not matter to a copy
    dst = torch.empty_like(src)
    times = time_call(lambda dst=dst, src=src: dst.copy_(src), device, reps, warmup=3 if gpu else 1)
    del src, dst
    median = statistics.median(times)
    return 2 * nbytes / median, {"bytes_per_buffer": nbytes, "reps": reps, "median_s": median, "min_s": min(times)}


def matmul_dtype(key: str):
    import torch

    return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
            "fp64": torch.float64}[key]


def measure_matmul(device: str, key: str, n: int | None = None, reps: int | None = None) -> tuple[float, dict[str, Any]]:
    """(FLOP/s, details) of an n x n x n torch.matmul in dtype `key`; "tf32" is fp32 with TF32 tensor cores
    allowed (torch.set_float32_matmul_precision("high")), "fp32" with them forbidden ("highest")."""
    import torch

    gpu = device.startswith("cuda")
    n = n or (8192 if gpu else 768)
    reps = reps or (10 if gpu else 4)
    dtype = matmul_dtype(key)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if key == "tf32" else "highest")
    try:
        # Warm-up long enough for cuBLAS heuristics and GPU clocks to settle.
        times = time_call(lambda a=a, b=b: torch.matmul(a, b), device, reps, warmup=5 if gpu else 1)
    finally:
        torch.set_float32_matmul_precision(previous)
    del a, b
    median = statistics.median(times)
    return 2 * n**3 / median, {"n": n, "reps": reps, "median_s": median, "min_s": min(times)}


def measure(device: str | None = None, dtypes: tuple[str, ...] | None = None, progress: bool = False) -> Ceilings:
    """Measure the ceilings of `device` now (no cache). GPU: ~5 s on an H100; CPU: ~1-2 s."""
    import torch

    device = _normalize(device)
    gpu = device.startswith("cuda")
    ident = device_identity(device)
    name, key = device_key(device)
    dtypes = dtypes or (GPU_MATMUL_DTYPES if gpu else CPU_MATMUL_DTYPES)
    steps = ["copy", *dtypes]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(steps), desc=f"measuring ceilings of {name}", unit="step")
    bandwidth, copy_details = measure_copy(device)
    if bar:
        bar.update(1)
    flops, matmul_details = {}, {}
    for k in dtypes:
        flops[k], matmul_details[k] = measure_matmul(device, k)
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    if gpu:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    details = {"copy": copy_details, "matmul": matmul_details, "copy_bytes_per_buffer": copy_details["bytes_per_buffer"],
               "method": "median of CUDA-event-timed runs" if gpu else "median of wall-clock runs"}
    if not gpu:
        details["last_level_cache_bytes"] = last_level_cache_bytes()
        details["cache_levels"] = [list(level) for level in cpu_cache_levels()]
        details["max_clock_hz"] = cpu_max_clock_hz()
        details["threads"] = torch.get_num_threads()
    return Ceilings(name, bandwidth, flops, key, time.strftime("%Y-%m-%dT%H:%M:%S"), details,
                    "cuda" if gpu else "cpu", {k: ident[k] for k in ("driver", "torch", "triton")})


# ---- cache -------------------------------------------------------------------------------------------

def cache_path(device: str | None = None) -> Path:
    name, key = device_key(device)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]
    return cache_dir() / f"{slug}-{key}.json"


def load_cached(device: str | None = None) -> Ceilings | None:
    """The cached ceilings of `device`, or None (never measures)."""
    path = cache_path(device)
    try:
        return Ceilings.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def get_ceilings(device: str | None = "cpu", refresh: bool = False, progress: bool = False) -> Ceilings:
    """Ceilings of `device` ("cpu", "cuda", "cuda:1"; None = cuda if available): from the cache, or measured
    now and cached (also when `refresh`)."""
    device = _normalize(device)
    if not refresh:
        cached = load_cached(device)
        if cached is not None:
            return cached
    c = measure(device, progress=progress)
    path = cache_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(c.to_dict(), indent=1))
    os.replace(tmp, path)  # atomic: a parallel reader sees the old file or the new one, never half of one
    return c
