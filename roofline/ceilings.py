"""Measured ceilings: copy bandwidth (bytes read + written) and matmul rate per dtype, cached per device.

Measured once per device + driver + library versions and cached as JSON (KWB_CACHE_DIR, default
~/.cache/kernel-workbench/ceilings), because datasheet peaks are rarely reached and SOL should be measured
against what the machine can actually do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Ceilings:
    device_name: str
    copy_bandwidth: float  # bytes/s, read + written
    matmul_flops: dict[str, float] = field(default_factory=dict)  # dtype key (fp32, tf32, fp16, bf16) -> FLOP/s
    key: str = ""
    measured_at: str = ""
    details: dict = field(default_factory=dict)

    def peak(self, dtype: str) -> float:
        from roofline.specs import _DTYPE_KEYS

        k = _DTYPE_KEYS.get(dtype, dtype)
        return self.matmul_flops.get(k) or self.matmul_flops.get("fp32") or max(self.matmul_flops.values())


def cache_dir() -> Path:
    return Path(os.environ.get("KWB_CACHE_DIR", Path.home() / ".cache" / "kernel-workbench")) / "ceilings"


def device_key(device: str) -> tuple[str, str]:
    import torch

    try:
        import triton

        tv = triton.__version__
    except Exception:  # pragma: no cover
        tv = "none"
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        driver = str(torch.version.cuda)
    else:
        import platform

        name, driver = f"cpu-{platform.machine()}-{os.cpu_count()}", platform.platform()
    raw = f"{name}|{driver}|{torch.__version__}|{tv}"
    return name, hashlib.sha256(raw.encode()).hexdigest()[:16]


def _time(fn, device: str, reps: int) -> float:
    """Median seconds of fn() over reps runs (events on GPU, wall clock on CPU)."""
    import torch

    fn()
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def measure(device: str) -> Ceilings:
    import torch

    gpu = device.startswith("cuda")
    name, key = device_key(device)
    n_copy = (1 << 30) if gpu else (1 << 24)  # 1 GiB / 16 MiB per buffer
    src = torch.empty(n_copy // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    t = _time(lambda dst=dst, src=src: dst.copy_(src), device, 20 if gpu else 5)
    bandwidth = 2 * n_copy / t
    del src, dst
    flops: dict[str, float] = {}
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16} if gpu \
        else {"fp32": torch.float32}
    n = 8192 if gpu else 512
    details = {}
    for key_name, dtype in dtypes.items():
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = key_name == "tf32"
        try:
            t = _time(lambda a=a, b=b: torch.matmul(a, b), device, 10 if gpu else 3)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        flops[key_name] = 2 * n**3 / t
        details[key_name] = {"n": n, "seconds": t}
        del a, b
    if gpu:
        torch.cuda.synchronize()
    return Ceilings(name, bandwidth, flops, key, time.strftime("%Y-%m-%dT%H:%M:%S"),
                    {"copy_bytes_per_buffer": n_copy, "matmul": details})


def get_ceilings(device: str = "cpu", refresh: bool = False) -> Ceilings:
    """Cached ceilings for `device`, measured on first use (or when `refresh`)."""
    name, key = device_key(device)
    path = cache_dir() / f"{key}.json"
    if path.exists() and not refresh:
        data = json.loads(path.read_text())
        return Ceilings(**data)
    c = measure(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(c), indent=1))
    return c
